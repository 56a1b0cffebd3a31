// Package invariants switches tensorlife's expensive self-checks and
// fail-fast behaviour on misuse. Built with the tensorlife_invariants tag,
// or with the race detector (as pebble does: a race build is a test build),
// Enabled is true and misuse that can only be a bug (a double free,
// releasing more owners than exist) panics where it is detected; otherwise
// it is returned as an error and counted, and Enabled is a constant false,
// so the checks compile away and production runs the tested path.
//
// CI runs the tests both ways. A test of misuse checks both behaviours with
// Recover: the error, returned or raised.
//
// IsNil is the other check every package makes, of its input: an interface
// handed to a constructor or an option that holds a nil value would panic
// at its first call, so it is refused where it is passed.
package invariants
