package tensor

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/heapfence"
	"github.com/tensorlife/tensorlife/track"
)

// These tests register handles themselves rather than turn retainer search
// on, which would last for the rest of this package's tests; with
// TENSORLIFE_RETAINERS=1 (tracktest, imported by this package's tests,
// turns it on) New and Retain have registered them already.
func note(t *Tensor) {
	if !heapfence.RetainersOn() {
		noteHandle(t)
	}
}

func registryAllocator(t *testing.T, opts ...track.Option) (*track.Tracker, Allocator) {
	t.Helper()
	dev, err := NewHostDevice(1 << 20)
	require.NoError(t, err)
	tr, err := track.New(opts...)
	require.NoError(t, err)
	alloc, err := NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	return tr, alloc
}

func TestRegistryResolvesARecordToItsLiveHandles(t *testing.T) {
	tr, alloc := registryAllocator(t)
	x, err := New(context.Background(), alloc, Float32, 4)
	require.NoError(t, err)
	note(x)
	r, err := x.Retain()
	require.NoError(t, err)
	note(r)

	assert.ElementsMatch(t, []any{x, r}, tr.Books().LiveHandles(x.ID()), "the lookup is installed")
	require.NoError(t, x.Free())
	assert.Equal(t, []any{r}, tr.Books().LiveHandles(x.ID()), "a freed handle is no longer looked for")
	require.NoError(t, r.Free())
	assert.Empty(t, tr.Books().LiveHandles(x.ID()))

	other, _ := registryAllocator(t)
	assert.Empty(t, other.Books().LiveHandles(x.ID()), "ids are per tracker")
}

func TestRegistryHoldsNoHandleAlive(t *testing.T) {
	reports := make(chan track.LeakReport, 1)
	tr, alloc := registryAllocator(t, track.OnLeak(func(l track.LeakReport) { reports <- l }))
	id := func() uint64 {
		x, err := New(context.Background(), alloc, Float32, 4)
		require.NoError(t, err)
		note(x)
		return x.ID()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		select {
		case l := <-reports:
			assert.Equal(t, id, l.ID, "the dropped handle was collected, registered or not")
			assert.Empty(t, tr.Books().LiveHandles(id))
			return
		default:
		}
		require.True(t, time.Now().Before(deadline), "the registered handle was never collected")
		runtime.Gosched() // let the finalizer goroutine run
	}
}

func TestRegistryIsSweptOfFreedHandles(t *testing.T) {
	tr, alloc := registryAllocator(t)
	for range 5000 {
		x, err := New(context.Background(), alloc, Uint8, 1)
		require.NoError(t, err)
		note(x)
		require.NoError(t, x.Free())
	}
	h := handlesOf(tr)
	h.mu.Lock()
	n := len(h.m)
	h.mu.Unlock()
	assert.Less(t, n, 5000, "freed handles are swept as the registry grows")
}

func TestUntrackedHandlesAreNotRegistered(t *testing.T) {
	dev, err := NewHostDevice(1 << 10)
	require.NoError(t, err)
	alloc, err := NewDeviceAllocator(dev, nil)
	require.NoError(t, err)
	x, err := New(context.Background(), alloc, Uint8, 8)
	require.NoError(t, err)
	defer x.Free()
	noteHandle(x) // no tracker: nowhere to register, and nothing fails
}

// Each tracker's handles are its own: the same record id in two trackers
// names two records.
func TestHandlesAreTheTrackers(t *testing.T) {
	a, allocA := registryAllocator(t)
	b, allocB := registryAllocator(t)
	x, err := New(context.Background(), allocA, Uint8, 1)
	require.NoError(t, err)
	defer x.Free()
	y, err := New(context.Background(), allocB, Uint8, 1)
	require.NoError(t, err)
	defer y.Free()
	note(x)
	note(y)
	require.Equal(t, x.ID(), y.ID(), "the first record of each tracker")
	ha, hb := a.Books().LiveHandles(x.ID()), b.Books().LiveHandles(y.ID())
	require.Len(t, ha, 1)
	require.Len(t, hb, 1)
	assert.Same(t, x, ha[0])
	assert.Same(t, y, hb[0])
}
