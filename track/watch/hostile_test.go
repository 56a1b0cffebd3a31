package watch_test

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// hostileAllocator is a part attached beside a pool on its device, whose
// PartInfo panics, or whose headroom is negative.
type hostileAllocator struct {
	panics       bool
	budget, left int64
}

func (h *hostileAllocator) PartInfo() track.PartInfo {
	if h.panics {
		panic("hostile PartInfo")
	}
	return track.PartInfo{Kind: "allocator", Device: "host", Budget: h.budget, Left: h.left}
}

var hostileAllocators = []struct {
	name   string
	part   hostileAllocator
	panics bool
}{
	{"PartInfo panics", hostileAllocator{panics: true}, true},
	{"a negative headroom under a budget", hostileAllocator{budget: 100, left: -50}, false},
	{"a negative free", hostileAllocator{left: -1 << 40}, false},
}

// hostileSetup is a leaking service's pool and watcher with part attached
// to the tracker beside the pool.
func hostileSetup(t *testing.T, part *hostileAllocator, opts ...watch.Option) (*track.Tracker, *pool.Pool, *watch.Watcher) {
	tr, err := track.New(track.Logger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr))
	require.NoError(t, err)
	track.Attach(tr, part)
	w, err := watch.New(tr, append(opts, watch.OnSuspect(func(watch.Suspect) {}))...)
	require.NoError(t, err)
	return tr, p, w
}

// A part that panics on every tick neither escapes Tick nor stops the
// forecast from the parts that answer; a negative headroom reaches no
// suspect.
func TestTickSurvivesHostileAllocators(t *testing.T) {
	for _, tc := range hostileAllocators {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				part := tc.part
				tr, p, w := hostileSetup(t, &part)
				var kept []*tensor.Tensor
				for range 10 {
					<-time.After(time.Second)
					ctx, end := track.WithRequest(context.Background())
					x, err := leakBlock(ctx, p)
					require.NoError(t, err)
					kept = append(kept, x)
					end()
					require.NotPanics(t, func() { require.NoError(t, w.Tick()) })
				}
				s := w.Suspects()
				require.Len(t, s, 1)
				assert.GreaterOrEqual(t, s[0].Headroom, int64(0), "no negative headroom reaches a suspect")
				if tc.panics {
					assert.Positive(t, tr.Totals().PartPanics, "each panic counted")
					assert.Equal(t, watch.HeadroomDeviceMemory, s[0].HeadroomOf, "the pool's figure stands")
					assert.Positive(t, s[0].RunsOutIn)
				} else {
					assert.Zero(t, tr.Totals().PartPanics)
				}
				for _, x := range kept {
					require.NoError(t, x.Free())
				}
				runtime.KeepAlive(&part)
			})
		})
	}
}

// On Start's loop, a goroutine of the watcher's own, a panic would end the
// process: it is recovered and counted, and the windows go on.
func TestStartLoopSurvivesHostileAllocators(t *testing.T) {
	for _, tc := range hostileAllocators {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				part := tc.part
				tr, p, w := hostileSetup(t, &part, watch.Every(time.Second))
				require.NoError(t, w.Start())
				var kept []*tensor.Tensor
				for range 10 {
					ctx, end := track.WithRequest(context.Background())
					x, err := leakBlock(ctx, p)
					require.NoError(t, err)
					kept = append(kept, x)
					end()
					<-time.After(time.Second + time.Millisecond)
				}
				synctest.Wait()
				require.NoError(t, w.Stop())
				assert.GreaterOrEqual(t, w.WindowsEnded(), uint64(9), "the loop went on")
				s := w.Suspects()
				require.Len(t, s, 1)
				assert.GreaterOrEqual(t, s[0].Headroom, int64(0))
				if tc.panics {
					assert.Positive(t, tr.Totals().PartPanics)
				}
				for _, x := range kept {
					require.NoError(t, x.Free())
				}
				runtime.KeepAlive(&part)
			})
		})
	}
}
