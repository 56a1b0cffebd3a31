package tracktest

import (
	"fmt"
	"io"
	"os"

	"github.com/tensorlife/tensorlife/track"
)

// TestingT is the part of testing.TB that VerifyNone uses: *testing.T,
// *testing.B, a testify suite's T() and a fake that records calls all
// satisfy it. When the value also has a Helper() method, it is called, so
// failures point at the test's line rather than this package's.
type TestingT interface {
	Error(args ...any)
}

// helper is the part of testing.TB that marks a frame as a helper. Every
// frame of this package between a test and its Error call calls it itself:
// Helper marks the function that calls it, so a shared function that called
// it would mark only itself.
type helper interface {
	Helper()
}

// VerifyNone fails t when tensors are live in tr (nil means
// track.Default()): it calls t.Error once with a report that lists every
// leaked tensor grouped by allocation site, with the full stack (see
// LeakError). A test that frees everything costs one snapshot of the
// tracker; one that leaks waits up to MaxSettle (default 1s) for frees in
// flight before it fails. An invalid option fails t with an error matching
// ErrInvalidOption and skips the check.
//
// Call it last, typically deferred first thing in the test:
//
//	defer tracktest.VerifyNone(t, tr)
//
// VerifyNone also fails t when a tensor of tr was freed twice since the
// last VerifyNone or Find of tr (since tr was made, on the first), naming
// the allocation line and both Free lines (see MisuseError); AllowMisuse
// lets such a test pass.
//
// VerifyNone checks the whole tracker. Tests that run in parallel and share
// a tracker see each other's tensors; give each its own tracker, or scope
// the check with Context.
//
// A handle dropped without Free is reported, at the line that made it,
// when the garbage collector finds it during the check, or earlier while
// its tensor is still live: held by another handle, or kept by a tracker
// with track.ReclaimLeaks(false). A tensor whose last handle was found and
// reclaimed before VerifyNone began has left the tracker and is not seen:
// on trackers that reclaim, use Context to catch those.
func VerifyNone(t TestingT, tr *track.Tracker, opts ...Option) {
	if t == nil {
		// Nowhere to fail: say so where a person will see it.
		fmt.Fprintln(stderr, "tracktest: VerifyNone called with a nil TestingT")
		t = stderrT{}
	}
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	cfg, err := newConfig(entryVerifyNone, opts)
	if err != nil {
		t.Error(err)
		return
	}
	le, me := cfg.checkWatched(cfg.watch(tracker(tr), scope{}, false))
	if le != nil {
		t.Error(le)
	}
	if me != nil {
		t.Error(me)
	}
}

// TestingM is the part of *testing.M that VerifyTestMain uses.
type TestingM interface {
	Run() int
}

// The process exit and the stream reports go to when there is no test to
// fail. VerifyTestMain is the one place that exits; this package's tests
// swap both.
var (
	exit             = os.Exit
	stderr io.Writer = os.Stderr
)

// VerifyTestMain runs a package's tests and, when they pass, checks tr (nil
// means track.Default()) as VerifyNone does. On leaks it prints the report
// to stderr and exits with status 1; otherwise it exits with the tests'
// status. The check includes every tensor the garbage collector found
// dropped without Free while the tests ran, reclaimed or not. Use it in
// TestMain, where it must be the last call:
//
//	func TestMain(m *testing.M) {
//		tracktest.VerifyTestMain(m, nil)
//	}
//
// When tests fail, no check is made: a failing test often stops before it
// frees, and its failure says more than a leak report would. An invalid
// option is reported and exits with status 1 before any test runs.
//
// VerifyTestMain exits the process, as TestMain must to report a status; it
// is meant for TestMain only.
func VerifyTestMain(m TestingM, tr *track.Tracker, opts ...Option) {
	cfg, err := newConfig(entryTestMain, opts)
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		exit(1)
		return
	}
	w := cfg.watch(tracker(tr), scope{}, true)
	code := m.Run()
	if code != 0 {
		w.drops.stop()
		exit(code)
		return
	}
	le, me := cfg.checkWatched(w)
	if le != nil {
		fmt.Fprintf(stderr, "%v\n", le)
		code = 1
	}
	if me != nil {
		fmt.Fprintf(stderr, "%v\n", me)
		code = 1
	}
	exit(code)
}

// stderrT reports to stderr when VerifyNone is given no TestingT.
type stderrT struct{}

func (stderrT) Error(args ...any) { fmt.Fprintln(stderr, args...) }
