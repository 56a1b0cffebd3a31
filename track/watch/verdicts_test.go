package watch_test

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

//go:noinline
func growingLeak(t testing.TB, ctx context.Context, tr *track.Tracker) *track.Record {
	return record(t, ctx, tr, 8<<10)
}

// A leak that keeps growing is one suspect from its first flag to the end,
// whatever its pace: the flag is strict, the clearing waits for the growth
// to stop for longer than its own pace has paused.
func TestGrowingLeakStaysOneSuspect(t *testing.T) {
	tests := []struct {
		name string
		leak func(request int, rng *rand.Rand) bool
	}{
		{"every request", func(int, *rand.Rand) bool { return true }},
		{"every third request", func(r int, _ *rand.Rand) bool { return r%3 == 0 }},
		{"one request in three at random", func(_ int, rng *rand.Rand) bool { return rng.IntN(3) == 0 }},
		{"bursts of 6 requests in 14", func(r int, _ *rand.Rand) bool { return r%14 < 6 }},
		{"bursts of 8 requests in 20", func(r int, _ *rand.Rand) bool { return r%20 < 8 }},
	}
	for _, tt := range tests {
		for seed := uint64(1); seed <= 5; seed++ {
			t.Run(tt.name, func(t *testing.T) {
				tr, w, log := watchedTracker(t, "growing")
				rng := rand.New(rand.NewPCG(seed, 11))
				var kept []*track.Record
				for request := 1; request <= 200; request++ {
					ctx, end := track.WithRequest(context.Background())
					if tt.leak(request, rng) {
						kept = append(kept, growingLeak(t, ctx, tr))
					}
					release(t, tr, record(t, ctx, tr, 64<<10)) // in flight
					end()
					require.NoError(t, w.Tick())
				}
				assert.Len(t, log.all(), 1, "flagged once")
				assert.Equal(t, 1, w.SuspectCount(), "a current suspect at the end")
				assert.Equal(t, int64(1), tr.Totals().Event(track.EventLeakSuspect))
				now := w.Suspects()
				require.Len(t, now, 1)
				assert.Equal(t, int64(len(kept))*8<<10, now[0].OutlivedBytes)
				assert.Equal(t, log.all()[0].SinceWindow, now[0].SinceWindow, "the same suspect since its flag")
				release(t, tr, kept...)
			})
		}
	}
}

// A leak that stops growing clears after its quiet period; one that then
// grows again is a new suspect.
func TestStoppedLeakClearsAndANewGrowthIsANewSuspect(t *testing.T) {
	tr, w, log := watchedTracker(t, "stopped")
	var kept []*track.Record
	grow := func(requests int, leak bool) {
		for range requests {
			ctx, end := track.WithRequest(context.Background())
			if leak {
				kept = append(kept, growingLeak(t, ctx, tr))
			}
			end()
			require.NoError(t, w.Tick())
		}
	}
	grow(20, true)
	require.Equal(t, 1, w.SuspectCount())
	grow(2*watch.DefaultWindows-1, false)
	assert.Equal(t, 1, w.SuspectCount(), "still a suspect 2·K-1 windows after the last growth")
	grow(1, false)
	assert.Zero(t, w.SuspectCount(), "cleared 2·K windows after the last growth")
	grow(20, true)
	assert.Equal(t, 1, w.SuspectCount())
	assert.Len(t, log.all(), 2)
	release(t, tr, kept...)
}

// A panicking OnSuspect is recovered, counted and logged, on a Tick and on
// the loop of Start.
func TestPanickingCallbackKillsNothing(t *testing.T) {
	leakFor := func(t *testing.T, tr *track.Tracker, windows int, tick func()) []*track.Record {
		var kept []*track.Record
		for range windows {
			kept = append(kept, growingLeak(t, context.Background(), tr))
			tick()
		}
		return kept
	}
	newPanicky := func(t *testing.T, opts ...watch.Option) (*track.Tracker, *watch.Watcher, *bytes.Buffer) {
		var logged bytes.Buffer
		tr, err := track.New(track.Name("panicky"), track.Logger(slog.New(slog.NewTextHandler(&logged, nil))))
		require.NoError(t, err)
		w, err := watch.New(tr, append(opts,
			watch.OnSuspect(func(watch.Suspect) { panic("callback bug") }))...)
		require.NoError(t, err)
		return tr, w, &logged
	}
	t.Run("on a Tick", func(t *testing.T) {
		tr, w, logged := newPanicky(t)
		kept := leakFor(t, tr, 10, func() { assert.NotPanics(t, func() { require.NoError(t, w.Tick()) }) })
		assert.Equal(t, int64(1), w.CallbackPanics())
		assert.Equal(t, 1, w.SuspectCount(), "the suspect stands")
		assert.Contains(t, logged.String(), "level=ERROR")
		assert.Contains(t, logged.String(), "OnSuspect callback panicked")
		assert.Contains(t, logged.String(), "panic=\"callback bug\"")
		release(t, tr, kept...)
	})
	t.Run("on the loop of Start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, w, logged := newPanicky(t, watch.Every(time.Second))
			require.NoError(t, w.Start())
			kept := leakFor(t, tr, 10, func() { elapse(time.Second) }) // fake time: one window ends
			assert.Equal(t, int64(1), w.CallbackPanics())
			assert.Contains(t, logged.String(), "OnSuspect callback panicked")
			require.NoError(t, w.Stop())
			release(t, tr, kept...)
		})
	})
	t.Run("a Goexit on the loop of Start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, err := track.New(track.Name("goexit"), track.Logger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			var calls atomic.Int64
			w, err := watch.New(tr, watch.Every(time.Second),
				watch.OnSuspect(func(watch.Suspect) { calls.Add(1); runtime.Goexit() }))
			require.NoError(t, err)
			require.NoError(t, w.Start())
			kept := leakFor(t, tr, 10, func() { elapse(time.Second) })
			require.Positive(t, calls.Load(), "the callback ended the loop's goroutine")
			before := w.WindowsEnded()
			elapse(3 * time.Second)
			assert.Equal(t, before+3, w.WindowsEnded(), "the loop goes on")
			require.NoError(t, w.Stop())
			release(t, tr, kept...)
		})
	})
}

// viaSites makes n distinct sites under a request that frees everything:
// sites that allocated and hold nothing outlived.
func viaSites(t testing.TB, tr *track.Tracker, bits, n int) {
	ctx, end := track.WithRequest(context.Background())
	defer end()
	for i := range n {
		via(i, bits, func() {
			r := &track.Record{Bytes: 256, Meta: track.InternMeta("activations", "host", "", nil)}
			require.NoError(t, tr.Books().Record(ctx, r, 0))
			require.NoError(t, r.Release())
		})
	}
}

// heapAfter returns the live heap after f, collected.
func heapAfter(f func()) uint64 {
	f()
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A watcher keeps nothing for the sites with nothing outlived, and gives
// back the histories of sites that stopped changing.
func TestWatcherMemoryIsPerSiteJudged(t *testing.T) {
	const sites = 1 << 12
	tr, err := track.New(track.MaxSites(2 * sites))
	require.NoError(t, err)
	viaSites(t, tr, 12, sites)
	require.Equal(t, sites, tr.Totals().Sites)

	var w *watch.Watcher
	before := heapAfter(func() {})
	after := heapAfter(func() { w, err = watch.New(tr, watch.OnSuspect(func(watch.Suspect) {})) })
	require.NoError(t, err)
	perSite := float64(int64(after)-int64(before)) / sites
	t.Logf("watch.New: %.1f B a site that allocated", perSite)
	assert.Less(t, perSite, 8.0, "a site with nothing outlived costs nothing")

	// Every site keeps and then frees one tensor: each has a history while
	// it changes, and none once it has stopped for a whole history.
	var kept []*track.Record
	for i := range sites {
		via(i, 12, func() {
			r := &track.Record{Bytes: 256, Meta: track.InternMeta("activations", "host", "", nil)}
			require.NoError(t, tr.Books().Record(context.Background(), r, 0))
			kept = append(kept, r)
		})
	}
	require.NoError(t, w.Tick())
	release(t, tr, kept...)
	kept = nil
	settled := heapAfter(func() {
		for range watch.DefaultHistory + 2 {
			require.NoError(t, w.Tick())
		}
	})
	runtime.KeepAlive(w)
	w = nil
	dropped := heapAfter(func() {})
	perSite = float64(int64(settled)-int64(dropped)) / sites
	t.Logf("after the sites settled: %.1f B a site", perSite)
	assert.Less(t, perSite, 16.0, "settled sites with nothing outlived cost nothing")
}

// A sparse leak whose steps lie further apart than the History a watcher
// keeps per site is flagged all the same: a site that stops changing gives
// back its history, not its run.
func TestSparseLeakBeyondTheHistory(t *testing.T) {
	tr, w, log := watchedTracker(t, "sparse")
	var kept []*track.Record
	named := flaggedAt(t, w, log, 400, func(request int) {
		ctx, end := track.WithRequest(context.Background())
		defer end()
		if request%(2*watch.DefaultHistory) == 0 {
			kept = append(kept, growingLeak(t, ctx, tr))
		}
	})
	require.NotZero(t, named)
	assert.Equal(t, 6*2*watch.DefaultHistory, named, "flagged at its 6th step")
	release(t, tr, kept...)
}
