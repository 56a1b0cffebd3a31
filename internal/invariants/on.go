//go:build tensorlife_invariants || race

package invariants

// Enabled reports whether the self-checks are on: built with the
// tensorlife_invariants tag or with the race detector.
const Enabled = true
