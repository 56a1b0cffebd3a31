//go:build !cgo

// Package cgocallback puts C frames on a Go stack for fpstack's
// differential test: Call runs a Go function from a C function, through
// cgo's callback path (crosscall2, cgocallback). Test files cannot use cgo,
// so the C side lives in this package. Without cgo, Available is false and
// Call runs f directly.
package cgocallback

// Available reports whether Call goes through C (cgo is enabled).
const Available = false

// Call runs f directly: without cgo there is no C to go through.
func Call(f func()) { f() }
