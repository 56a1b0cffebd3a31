package foreign_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// setup returns a host device, a fresh tracker and an allocator over both,
// and checks when the test ends that every tensor was freed.
func setup(t *testing.T, capacity int64, opts ...track.Option) (*tensor.HostDevice, *track.Tracker, *tensor.DeviceAllocator) {
	t.Helper()
	dev, tr, alloc := setupUnchecked(t, capacity, opts...)
	t.Cleanup(func() { tracktest.VerifyNone(t, tr) })
	return dev, tr, alloc
}

// setupUnchecked is setup for tests that leak on purpose.
func setupUnchecked(t *testing.T, capacity int64, opts ...track.Option) (*tensor.HostDevice, *track.Tracker, *tensor.DeviceAllocator) {
	t.Helper()
	dev, err := tensor.NewHostDevice(capacity)
	require.NoError(t, err)
	tr, err := track.New(opts...)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	return dev, tr, alloc
}

// awaitLeak runs the garbage collector until a leak report arrives on
// reports, and returns it.
func awaitLeak(t *testing.T, reports <-chan track.LeakReport) track.LeakReport {
	t.Helper()
	var got track.LeakReport
	require.Eventually(t, func() bool {
		runtime.GC()
		select {
		case got = <-reports:
			return true
		default:
			return false
		}
	}, 5*time.Second, 10*time.Millisecond)
	return got
}

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
