package watch_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// budgetRun is a service leaking 32 KiB a request (leakBlock) through a
// pool with a budget, one window per request.
type budgetRun struct {
	tr   *track.Tracker
	p    *pool.Pool
	w    *watch.Watcher
	log  *bytes.Buffer
	kept []*tensor.Tensor
	ooms int
}

func newBudgetRun(t *testing.T, budget int64) *budgetRun {
	log := &bytes.Buffer{}
	tr, err := track.New(track.Name("budget"), track.Logger(slog.New(slog.NewTextHandler(log, nil))))
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(budget))
	require.NoError(t, err)
	r := &budgetRun{tr: tr, p: p, log: log}
	r.w, err = watch.New(tr, watch.OnSuspect(func(watch.Suspect) {}))
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, x := range r.kept {
			assert.NoError(t, x.Free())
		}
	})
	return r
}

// requests serves n requests, each of which keeps a leakBlock when leak is
// set (and counts the allocations refused), and ends a window.
func (r *budgetRun) requests(t *testing.T, n int, leak bool) {
	for range n {
		ctx, end := track.WithRequest(context.Background())
		if leak {
			x, err := leakBlock(ctx, r.p)
			switch {
			case errors.Is(err, tensor.ErrOutOfMemory):
				r.ooms++
			default:
				require.NoError(t, err)
				r.kept = append(r.kept, x)
			}
		}
		end()
		require.NoError(t, r.w.Tick())
	}
}

// quiet is more windows than any plateau below the budget stands: the
// clearing waits 2·K windows without a new high.
const quiet = 4 * watch.DefaultWindows

// A leak stops growing when its memory is full: then it stays a suspect,
// says that its memory ran out, and clears only when its bytes are freed
// or handed to an owner. Below the budget, a plateau clears as before.
func TestSuspectStaysWhileItsMemoryRanOut(t *testing.T) {
	t.Run("a plateau below the budget clears", func(t *testing.T) {
		r := newBudgetRun(t, 4<<20)
		r.requests(t, 10, true)
		require.Equal(t, 1, r.w.SuspectCount())
		r.requests(t, quiet, false)
		assert.Zero(t, r.w.SuspectCount(), "2·K windows without growth, memory left: cleared")
		assert.Zero(t, r.ooms)
	})
	t.Run("an allocation failed: it stays", func(t *testing.T) {
		r := newBudgetRun(t, 1<<20)
		r.requests(t, 40, true) // 32 blocks fill the budget; the rest are refused
		require.Positive(t, r.ooms, "the leak filled the budget")
		r.requests(t, quiet, true)
		r.requests(t, quiet, false)
		require.Equal(t, 1, r.w.SuspectCount(), "a leak that filled its memory stays")
		s := r.w.Suspects()
		require.Len(t, s, 1)
		assert.Contains(t, s[0].Site.Location().Function, "leakBlock", "its line")
		assert.Contains(t, s[0].RanOut, "failed for lack of memory since it last grew")
		assert.Contains(t, s[0].RanOut, "on host")
		assert.Contains(t, s[0].Forecast(), "has run out")
		assert.Zero(t, s[0].RunsOutIn, "nothing left to forecast")
		assert.Equal(t, int64(len(r.kept))*32<<10, s[0].OutlivedBytes)
		assert.Equal(t, 1, bytes.Count(r.log.Bytes(), []byte("the memory it draws from ran out")),
			"logged once, when it ran out")
		assert.Equal(t, int64(1), r.tr.Totals().Event(track.EventLeakSuspect), "one suspect throughout")

		require.NoError(t, r.kept[0].Free()) // one of its bytes given back
		r.kept = r.kept[1:]
		r.requests(t, 1, false)
		assert.Zero(t, r.w.SuspectCount(), "freeing clears it at once")
	})
	t.Run("the headroom is below its growth: it stays", func(t *testing.T) {
		r := newBudgetRun(t, 10*32<<10+16<<10) // 16 KiB left after 10 blocks: less than one
		r.requests(t, 10, true)
		r.requests(t, 3*quiet, false)
		require.Zero(t, r.ooms, "nothing was refused")
		s := r.w.Suspects()
		require.Len(t, s, 1, "a plateau at the budget stays")
		assert.Equal(t, "16 KiB of the pool budget on host left, less than its growth of 32 KiB a window", s[0].RanOut)

		var owner = track.Owner{Name: "sessions", MaxBytes: 1 << 20}
		for _, x := range r.kept {
			require.NoError(t, x.HandTo(&owner))
		}
		r.requests(t, 1, false)
		assert.Zero(t, r.w.SuspectCount(), "handed to an owner: cleared at once")
	})
}

// manyShapes keeps one tensor of a new shape each call: past the 64 shapes
// a site counts apart.
//
//go:noinline
func manyShapes(t *testing.T, tr *track.Tracker, ctx context.Context, i int) *track.Record {
	r := &track.Record{Bytes: 8 << 10, Meta: track.InternMeta("mask", "cuda:3", "float32", []int{2048 + i})}
	require.NoError(t, tr.Books().Record(ctx, r, 0))
	return r
}

// A suspect whose tensors come in more shapes than its site counts apart
// is still on its device: the forecast and the memory that ran out are
// that device's.
func TestSuspectDeviceWithManyShapes(t *testing.T) {
	tr, w, _ := watchedTracker(t, "shapes")
	var kept []*track.Record
	for i := range 10 { // 40 new shapes a request: most past the 64 counted apart
		ctx, end := track.WithRequest(context.Background())
		for j := range 40 {
			kept = append(kept, manyShapes(t, tr, ctx, 40*i+j))
		}
		end()
		require.NoError(t, w.Tick())
	}
	s := w.Suspects()
	require.Len(t, s, 1)
	assert.Equal(t, "cuda:3", s[0].Device)
	release(t, tr, kept...)
}
