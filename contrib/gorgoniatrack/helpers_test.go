package gorgoniatrack_test

import (
	"log/slog"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/contrib/gorgoniatrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// env is a host device, a tracker, a pool over the
// device recording in the tracker, and an engine over the pool.
type env struct {
	dev  *tensor.HostDevice
	tr   *track.Tracker
	pool *pool.Pool
	eng  *gorgoniatrack.Engine
}

func newEnv(t testing.TB, capacity int64, opts ...track.Option) *env {
	t.Helper()
	dev, err := tensor.NewHostDevice(capacity)
	require.NoError(t, err)
	quiet := slog.New(slog.DiscardHandler) // the tests read the reports
	tr, err := track.New(append([]track.Option{track.Logger(quiet)}, opts...)...)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr))
	require.NoError(t, err)
	eng, err := gorgoniatrack.NewEngine(p)
	require.NoError(t, err)
	return &env{dev: dev, tr: tr, pool: p, eng: eng}
}

// live returns the allocations live in the tracker.
func (e *env) live(t testing.TB) []track.Allocation {
	t.Helper()
	return e.tr.Snapshot().Allocations
}

// here returns the line it is called from, as a site names it.
func here() (file string, line int) {
	_, file, line, _ = runtime.Caller(1)
	return file, line
}

// awaitLeak collects until a leak report arrives on reports, and returns
// it. Each round is a collection and a wait for the finalizers it queued,
// so the report is waited on the runtime, not on a clock; the bound only
// turns a missing report into a failure.
func awaitLeak(t testing.TB, reports <-chan track.LeakReport) track.LeakReport {
	t.Helper()
	for range 10 {
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
// finalizers queued before it have run by then.
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
