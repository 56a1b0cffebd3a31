package tensor_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/tensor"
)

// countingAllocator counts the blocks released through it.
type countingAllocator struct {
	*tensor.DeviceAllocator
	releases atomic.Int64
}

func (a *countingAllocator) Release(b tensor.Block) error {
	a.releases.Add(1)
	return a.DeviceAllocator.Release(b)
}

func untrackedSetup(t *testing.T) (*tensor.HostDevice, *countingAllocator) {
	t.Helper()
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	da, err := tensor.NewDeviceAllocator(dev, nil)
	require.NoError(t, err)
	return dev, &countingAllocator{DeviceAllocator: da}
}

// settle runs the garbage collector until the finalizers it queued have run.
func settle() {
	for range 5 {
		collect()
	}
}

// sentinel is an object whose finalizer says the finalizer goroutine got to it.
type sentinel struct{ done chan struct{} }

// collect runs a garbage collection and waits until the finalizer goroutine
// has run the finalizer of a sentinel that collection found: the
// finalizers queued before it have run by then (one goroutine runs them in
// turn). It waits on the runtime, not on a clock.
//
//go:noinline
func collect() {
	done := make(chan struct{})
	s := &sentinel{done: done}
	runtime.SetFinalizer(s, func(s *sentinel) { close(s.done) })
	s = nil // drop the only reference before collecting
	runtime.GC()
	<-done
}

// collectUntilFree runs the garbage collector until dev holds no memory,
// then until the finalizers it queued have run.
func collectUntilFree(t *testing.T, dev *tensor.HostDevice) {
	t.Helper()
	require.Eventually(t, func() bool { runtime.GC(); return dev.Used() == 0 }, 5*time.Second, time.Millisecond)
	settle()
}

// untrackedPair makes an untracked tensor and a second handle on it, of
// the given kind ("retain" or "view").
//
//go:noinline
func untrackedPair(t *testing.T, alloc tensor.Allocator, second string) (*tensor.Tensor, *tensor.Tensor) {
	x, err := tensor.New(context.Background(), alloc, tensor.Float32, 64)
	require.NoError(t, err)
	var y *tensor.Tensor
	if second == "view" {
		y, err = x.View(16, 32)
	} else {
		y, err = x.Retain()
	}
	require.NoError(t, err)
	return x, y
}

func TestUntrackedTensorMemoryReturnsOnceEveryHandleIsGone(t *testing.T) {
	for _, second := range []string{"retain", "view"} {
		t.Run(second, func(t *testing.T) {
			t.Run("both freed", func(t *testing.T) {
				dev, alloc := untrackedSetup(t)
				x, y := untrackedPair(t, alloc, second)
				require.NoError(t, x.Free())
				assert.EqualValues(t, 256, dev.Used(), "the second handle still owns the memory")
				require.NoError(t, y.Free())
				assert.Zero(t, dev.Used())
				settle()
				assert.EqualValues(t, 1, alloc.releases.Load(), "released once, by the last Free, never again by the collector")
			})
			t.Run("own handle dropped, second freed", func(t *testing.T) {
				dev, alloc := untrackedSetup(t)
				_, y := untrackedPair(t, alloc, second)
				settle()
				assert.EqualValues(t, 256, dev.Used(), "a live handle keeps the memory however the other went")
				require.NoError(t, y.Free())
				y = nil
				collectUntilFree(t, dev)
				assert.EqualValues(t, 1, alloc.releases.Load())
			})
			t.Run("own handle freed, second dropped", func(t *testing.T) {
				dev, alloc := untrackedSetup(t)
				x, _ := untrackedPair(t, alloc, second)
				require.NoError(t, x.Free())
				collectUntilFree(t, dev)
				assert.EqualValues(t, 1, alloc.releases.Load())
				err, _ := invariants.Recover(x.Free)
				assert.ErrorIs(t, err, tensor.ErrDoubleFree, "the freed handle still answers")
			})
			t.Run("both dropped", func(t *testing.T) {
				dev, alloc := untrackedSetup(t)
				untrackedPair(t, alloc, second)
				collectUntilFree(t, dev)
				assert.EqualValues(t, 1, alloc.releases.Load())
			})
		})
	}
}

func TestUntrackedTensorAnswersLikeATrackedOne(t *testing.T) {
	_, alloc := untrackedSetup(t)
	ctx := context.Background()
	x, err := tensor.Make(ctx, alloc, tensor.Spec{DType: tensor.Int32, Shape: tensor.Shape{3, 4}, Kind: "logits"})
	require.NoError(t, err)
	y, err := tensor.New(ctx, alloc, tensor.Int32, 5)
	require.NoError(t, err)
	assert.NotEqual(t, x.ID(), y.ID())
	assert.Equal(t, x.ID(), x.ID(), "an id is stable")
	r, err := x.Retain()
	require.NoError(t, err)
	assert.Equal(t, x.ID(), r.ID(), "handles of one tensor share its id")
	assert.Equal(t, tensor.Shape{3, 4}, x.Shape())
	assert.Equal(t, "logits", x.Kind())
	assert.Equal(t, tensor.Int32, r.DType())
	assert.EqualValues(t, 48, r.Bytes())
	assert.Same(t, alloc, x.Allocator())
	require.NoError(t, x.CopyFromHost([]byte("0123456789ab0123456789ab0123456789ab0123456789ab")))
	got := make([]byte, 48)
	require.NoError(t, r.CopyToHost(got))
	assert.Equal(t, "0123456789ab0123456789ab0123456789ab0123456789ab", string(got))
	for _, h := range []*tensor.Tensor{x, r, y} {
		require.NoError(t, h.Free())
	}
	err, _ = invariants.Recover(r.Free)
	assert.ErrorIs(t, err, tensor.ErrDoubleFree)
	_, err = x.Ptr()
	assert.ErrorIs(t, err, tensor.ErrFreed)
	assert.Contains(t, x.String(), "freed")
}

func TestZeroTensorValueIsFreed(t *testing.T) {
	var x tensor.Tensor
	assert.True(t, x.Freed())
	assert.ErrorIs(t, x.Free(), tensor.ErrFreed)
	_, err := x.Retain()
	assert.ErrorIs(t, err, tensor.ErrFreed)
}
