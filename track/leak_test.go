package track_test

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// dropOnCleanup arranges for r to be reported dropped by the runtime's
// cleanup goroutine, as a tensor's handle is, once the collector finds an
// object only this call saw; done is closed when the report returned.
//
//go:noinline
func dropOnCleanup(r *track.Record) (done chan struct{}) {
	done = make(chan struct{})
	handle := new([8]*int)
	runtime.AddCleanup(handle, func(r *track.Record) {
		r.ReportDropped(nil, "")
		close(done)
	}, r)
	return done
}

// collectedDrop reports r dropped from the cleanup goroutine and waits
// until that report has returned there.
func collectedDrop(r *track.Record) {
	done := dropOnCleanup(r)
	runtime.GC()
	<-done
}

type sentinel struct{ _ [8]*int }

// finalizersRun sets a finalizer and a cleanup of the test's own and waits
// for both to run: the runtime's goroutines still run them.
func finalizersRun() {
	finalized, cleaned := make(chan struct{}), make(chan struct{})
	func() {
		s, c := new(sentinel), new(sentinel)
		runtime.SetFinalizer(s, func(*sentinel) { close(finalized) })
		runtime.AddCleanup(c, func(ch chan struct{}) { close(ch) }, cleaned)
	}()
	runtime.GC()
	<-finalized
	<-cleaned
}

// A leak callback is a caller's code: one that blocks forever, panics or
// calls runtime.Goexit. In each case the runtime's cleanup goroutine is
// never held (a report returns there at once, and the test's own
// finalizer and cleanup run), the same tracker's later leaks are counted
// and found, its other callbacks (a WatchLeaks, as tracktest's) are given
// every report, in order, and another tracker's leaks are delivered.
func TestALeakCallbackThatBlocksPanicsOrGoexitsHoldsNothingElse(t *testing.T) {
	for _, act := range []string{"block", "panic", "goexit"} {
		t.Run(act, func(t *testing.T) {
			var logs bytes.Buffer
			var logMu sync.Mutex
			logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
			unblock := make(chan struct{})
			entered := make(chan uint64, 8)
			hostile, err := track.New(track.Name("hostile"), track.Logger(logger), track.ReclaimLeaks(false),
				track.OnLeak(func(l track.LeakReport) {
					entered <- l.ID
					switch act {
					case "block":
						<-unblock
					case "panic":
						panic("leak callback bug")
					case "goexit":
						runtime.Goexit()
					}
				}))
			require.NoError(t, err)
			var watched []uint64
			var watchedMu sync.Mutex
			stopWatch := hostile.WatchLeaks(func(l track.LeakReport) {
				watchedMu.Lock()
				defer watchedMu.Unlock()
				watched = append(watched, l.ID)
			})
			otherGot := make(chan track.LeakReport, 1)
			other, err := track.New(track.Name("other"), track.OnLeak(func(l track.LeakReport) { otherGot <- l }))
			require.NoError(t, err)

			first := recordA(hostile, context.Background(), 64, "tensor")
			collectedDrop(first) // returns on the cleanup goroutine whatever the callback does
			assert.Equal(t, first.ID(), <-entered, "the callback is called")
			finalizersRun()

			later := recordA(hostile, context.Background(), 64, "tensor")
			collectedDrop(later)
			finalizersRun()
			assert.EqualValues(t, 2, hostile.Totals().GCLeaks, "the later leak is counted")
			assert.EqualValues(t, 1, later.Site().Stats().GCLeaks, "at its line")
			leaked, err := hostile.SnapshotOf(track.Filter{LeakedOnly: true, Allocations: true})
			require.NoError(t, err)
			assert.Len(t, leaked.Allocations, 2, "and found")

			stopWatch() // waits for the watcher's own reports only
			assert.Equal(t, []uint64{first.ID(), later.ID()}, watched, "the other callback is given both, in order")

			o := recordA(other, context.Background(), 64, "tensor")
			collectedDrop(o)
			assert.Equal(t, o.ID(), (<-otherGot).ID, "another tracker's leak is delivered")
			other.Books().WaitLeaks()

			if act == "block" {
				assert.Empty(t, entered, "the second report waits behind the blocked one")
				close(unblock)
			}
			hostile.Books().WaitLeaks()
			assert.Equal(t, later.ID(), <-entered, "the later report is delivered once the callback returns")
			tt := hostile.Totals()
			assert.Zero(t, tt.LeakReportsLost)
			if act == "panic" {
				assert.EqualValues(t, 2, tt.PartPanics, "each panic counted")
				logMu.Lock()
				assert.Equal(t, 1, strings.Count(logs.String(), "a leak callback panicked"), "and logged once")
				logMu.Unlock()
			} else {
				assert.Zero(t, tt.PartPanics)
			}
			release(t, hostile, first, later)
			release(t, other, o)
		})
	}
}

// A callback that falls behind is given at most 4096 waiting reports:
// past them a report is not given to it, but counted and logged once;
// every leak is counted exactly, the reports it is given come in order,
// and a callback beside it is given every report: the test waits for each
// to reach it, which a callback held back by the blocked one never would.
func TestALeakCallbackFarBehindLosesReportsButNoLeak(t *testing.T) {
	var logs bytes.Buffer
	var logMu sync.Mutex
	unblock := make(chan struct{})
	entered := make(chan struct{}, 1)
	var got []uint64
	tr := newTracker(t, track.Logger(slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))),
		track.OnLeak(func(l track.LeakReport) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-unblock
			got = append(got, l.ID)
		}))
	seen := make(chan struct{})
	watched := 0
	stop := tr.WatchLeaks(func(track.LeakReport) {
		watched++
		seen <- struct{}{}
	})
	const n = 5000
	recs := make([]*track.Record, n)
	for i := range recs {
		recs[i] = recordA(tr, context.Background(), 64, "tensor")
		recs[i].ReportDropped(nil, "")
		<-seen // the watcher has it: nothing the blocked callback does holds it back
		if i == 0 {
			<-entered // the first report is inside the blocked callback
		}
	}
	stop()
	assert.Equal(t, n, watched, "the watcher beside it kept up")
	tt := tr.Totals()
	assert.EqualValues(t, n, tt.GCLeaks, "every leak is counted")
	// One report is inside the callback and 4096 wait for it.
	assert.EqualValues(t, n-1-4096, tt.LeakReportsLost)
	close(unblock)
	tr.Books().WaitLeaks()
	require.Len(t, got, 1+4096)
	for i, id := range got {
		require.Equal(t, recs[i].ID(), id, "in order")
	}
	logMu.Lock()
	assert.Equal(t, 1, strings.Count(logs.String(), "fallen behind"), "the loss is logged once")
	logMu.Unlock()
	release(t, tr, recs...)
}

// lockedWriter serializes a log handler's writes with the test's reads.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A callback may end its own subscription, or wait for the leaks, from
// inside a report: neither waits on itself.
func TestALeakCallbackMayStopItsWatchAndWait(t *testing.T) {
	tr := newTracker(t, track.OnLeak(func(track.LeakReport) {}))
	var stop func()
	var got []uint64
	stop = tr.WatchLeaks(func(l track.LeakReport) {
		got = append(got, l.ID)
		tr.Books().WaitLeaks()
		stop()
	})
	a := recordA(tr, context.Background(), 8, "tensor")
	b := recordA(tr, context.Background(), 8, "tensor")
	a.ReportDropped(nil, "")
	tr.Books().WaitLeaks()
	b.ReportDropped(nil, "")
	stop() // already stopped by the callback: returns
	tr.Books().WaitLeaks()
	assert.Equal(t, []uint64{a.ID()}, got, "stopped after its first report")
	release(t, tr, a, b)
}
