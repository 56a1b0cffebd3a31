//go:build !tensorlife_invariants

package invariants

// Enabled reports whether the tensorlife_invariants build tag is set.
const Enabled = false
