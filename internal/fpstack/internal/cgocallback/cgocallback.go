//go:build cgo

// Package cgocallback puts C frames on a Go stack for fpstack's
// differential test: Call runs a Go function from a C function, through
// cgo's callback path (crosscall2, cgocallback). Test files cannot use cgo,
// so the C side lives in this package. Without cgo, Available is false and
// Call runs f directly.
package cgocallback

/*
#include <stdint.h>
void fpstack_call_go(uintptr_t handle);
*/
import "C"

import "runtime/cgo"

// Available reports whether Call goes through C (cgo is enabled).
const Available = true

// Call calls f from C: Go calls the C function fpstack_call_go, which calls
// back into Go to run f.
func Call(f func()) {
	h := cgo.NewHandle(f)
	defer h.Delete()
	C.fpstack_call_go(C.uintptr_t(h))
}

//export fpstackGoCallback
func fpstackGoCallback(handle C.uintptr_t) {
	cgo.Handle(handle).Value().(func())()
}
