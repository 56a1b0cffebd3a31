package tracktest

import (
	"io"

	"github.com/tensorlife/tensorlife/track"
)

// SwapProcess replaces the process exit and stderr that VerifyTestMain and
// a nil TestingT use, and returns a function that restores them. Tests that
// call it must not run in parallel with each other.
func SwapProcess(exitFunc func(int), w io.Writer) (restore func()) {
	oldExit, oldStderr := exit, stderr
	exit, stderr = exitFunc, w
	return func() { exit, stderr = oldExit, oldStderr }
}

// Cursor returns where the next check of tr begins reading its misuses.
func Cursor(tr *track.Tracker) uint64 { return cursor(tr) }
