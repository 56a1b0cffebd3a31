package tensor_test

import (
	"context"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
)

// thirdParty is an allocator of no package of tensorlife's, whose Release
// misbehaves as its act says, and otherwise gives the block to inner.
type thirdParty struct {
	inner    tensor.Allocator
	act      atomic.Int32 // a tensortest.Act + 1; 0: behaves
	gate     chan struct{}
	released atomic.Int64
}

func (a *thirdParty) Device() tensor.Device                      { return a.inner.Device() }
func (a *thirdParty) Tracker() *track.Tracker                    { return a.inner.Tracker() }
func (a *thirdParty) Allocate(bytes int64) (tensor.Block, error) { return a.inner.Allocate(bytes) }
func (a *thirdParty) Release(b tensor.Block) error {
	switch tensortest.Act(a.act.Load() - 1) {
	case tensortest.ActPanic:
		panic("thirdParty: hostile Release")
	case tensortest.ActGoexit:
		runtime.Goexit()
	case tensortest.ActBlock:
		<-a.gate
	}
	a.released.Add(1)
	return a.inner.Release(b)
}

//go:noinline
func dropOne(t *testing.T, alloc tensor.Allocator) {
	_, err := tensor.New(context.Background(), alloc, tensor.Uint8, 64)
	require.NoError(t, err)
}

// The runtime's finalizer goroutine never runs a part's code: a dropped
// tensor's memory goes back through tensor's release queue, whose
// releasers recover a panic (counted on the tracker), survive a Goexit and
// leave the finalizer goroutine free while a Release blocks, for every
// allocator, tracked or not.
func TestDroppedReleaseNeverRunsAPartOnTheFinalizerGoroutine(t *testing.T) {
	for _, act := range []tensortest.Act{tensortest.ActPanic, tensortest.ActGoexit, tensortest.ActBlock} {
		for _, tracked := range []bool{true, false} {
			name := map[tensortest.Act]string{tensortest.ActPanic: "panic", tensortest.ActGoexit: "goexit", tensortest.ActBlock: "block"}[act]
			if !tracked {
				name += "/untracked"
			}
			t.Run(name, func(t *testing.T) {
				host, err := tensor.NewHostDevice(1 << 20)
				require.NoError(t, err)
				var tr *track.Tracker
				if tracked {
					tr, err = track.New(track.Logger(slog.New(slog.DiscardHandler)))
					require.NoError(t, err)
				}
				inner, err := tensor.NewDeviceAllocator(host, tr)
				require.NoError(t, err)
				a := &thirdParty{inner: inner, gate: make(chan struct{})}
				a.act.Store(int32(act) + 1)

				dropOne(t, a)
				collect() // the finalizer goroutine is not held by the Release
				if act == tensortest.ActBlock {
					dropOne(t, a)
					collect() // nor by a second one, behind the first
					close(a.gate)
				}
				tensor.WaitReleases()
				dropped := int64(1)
				if act == tensortest.ActBlock {
					dropped = 2
				}
				if tracked {
					assert.Zero(t, tr.Totals().LiveCount, "the records left on the collector's goroutine")
					assert.Equal(t, dropped, tr.Totals().GCLeaks)
				}
				switch act {
				case tensortest.ActPanic:
					if tracked {
						assert.EqualValues(t, 1, tr.Totals().PartPanics, "the panic counted")
					}
				case tensortest.ActBlock:
					assert.EqualValues(t, 2, a.released.Load())
					assert.Zero(t, host.Used())
				}

				// The queue goes on after a panic or a Goexit.
				a.act.Store(0)
				dropOne(t, a)
				collect()
				tensor.WaitReleases()
				returned := int64(1) // the last drop's; a panic's and a Goexit's never return
				if act == tensortest.ActBlock {
					returned = 3
				}
				assert.Equal(t, returned, a.released.Load())
			})
		}
	}
}

// named is a third-party allocator whose device is dev.
type named struct {
	tensor.Allocator
	dev tensor.Device
}

func (a named) Device() tensor.Device { return a.dev }

// New reads a third-party allocator's device name after the allocation: a
// Name that panics or calls runtime.Goexit gives the memory back either way.
func TestNewGivesTheMemoryBackWhenTheDeviceNameEndsTheGoroutine(t *testing.T) {
	for _, act := range []tensortest.Act{tensortest.ActPanic, tensortest.ActGoexit} {
		host, err := tensor.NewHostDevice(1 << 20)
		require.NoError(t, err)
		inner, err := tensor.NewDeviceAllocator(host, nil)
		require.NoError(t, err)
		dev := tensortest.NewHostile(host)
		dev.Do(act, "Name")
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err := tensor.New(context.Background(), named{inner, dev}, tensor.Uint8, 4096)
			assert.ErrorIs(t, err, tensor.ErrPanic)
		}()
		<-done
		assert.Zero(t, host.Used(), "the allocation given back")
		assert.Zero(t, inner.Stats().Reserved)
	}
}

// A leak callback is a caller's code, and never runs on the runtime's
// finalizer or cleanup goroutine: one that panics or calls runtime.Goexit
// leaves the finalizers running (a Goexit there would have ended the
// runtime's goroutine, and no finalizer of the process would run again).
func TestALeakCallbackThatEndsItsGoroutineLeavesTheFinalizersRunning(t *testing.T) {
	for _, act := range []tensortest.Act{tensortest.ActPanic, tensortest.ActGoexit} {
		host, err := tensor.NewHostDevice(1 << 20)
		require.NoError(t, err)
		var calls atomic.Int64
		tr, err := track.New(track.Logger(slog.New(slog.DiscardHandler)), track.OnLeak(func(track.LeakReport) {
			calls.Add(1)
			if act == tensortest.ActGoexit {
				runtime.Goexit()
			}
			panic("leak callback bug")
		}))
		require.NoError(t, err)
		a, err := tensor.NewDeviceAllocator(host, tr)
		require.NoError(t, err)
		dropOne(t, a)
		collect()
		dropOne(t, a)
		collect() // returns: the finalizer goroutine still runs finalizers
		tensor.WaitReleases()
		tr.Books().WaitLeaks()
		assert.EqualValues(t, 2, calls.Load())
		assert.EqualValues(t, 2, tr.Totals().GCLeaks)
		assert.Zero(t, host.Used(), "both reclaimed")
	}
}
