// Package invariants switches tensorlife's expensive self-checks and
// fail-fast behaviour on misuse. Built with the tensorlife_invariants tag,
// Enabled is true and misuse that can only be a bug (a double free,
// releasing more owners than exist) panics where it is detected; without
// the tag it is returned as an error and counted, and Enabled is a constant
// false, so the checks compile away and production runs the tested path.
package invariants
