package tracktest

import "io"

// SwapProcess replaces the process exit and stderr that VerifyTestMain and
// a nil TestingT use, and returns a function that restores them. Tests that
// call it must not run in parallel with each other.
func SwapProcess(exitFunc func(int), w io.Writer) (restore func()) {
	oldExit, oldStderr := exit, stderr
	exit, stderr = exitFunc, w
	return func() { exit, stderr = oldExit, oldStderr }
}

// Cursors returns how many trackers the misuse cursors remember.
func Cursors() int {
	cursors.mu.Lock()
	defer cursors.mu.Unlock()
	return len(cursors.last)
}
