package foreign_test

import (
	"runtime"
	"testing"

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

// awaitLeak collects until a leak report arrives on reports, and returns
// it. Each round is a collection and a wait for the finalizers it queued
// (collect), so a report is waited on the runtime, not on a clock; a handle
// dropped before the call is found in the first round, the bound only turns
// a missing report into a failure.
func awaitLeak(t *testing.T, reports <-chan track.LeakReport) track.LeakReport {
	t.Helper()
	for range 10 {
		runtime.GC()
		collect()
		select {
		case got := <-reports:
			return got
		default:
		}
	}
	t.Fatal("no leak report after 10 collections")
	return track.LeakReport{}
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
