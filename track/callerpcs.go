package track

import (
	"runtime"

	"github.com/tensorlife/tensorlife/internal/fpstack"
)

// CallerPCs writes the caller's physical frames into buf (skip as in
// Record), interning nothing: for hot paths that symbolize only for a report.
//
//go:noinline
func (t *Tracker) CallerPCs(skip int, buf []uintptr) int {
	if skip < 0 {
		skip = 0
	}
	if !t.cfg.framePointers {
		// 0 is runtime.Callers, 1 is CallerPCs, 2 the function calling it.
		return runtime.Callers(skip+2, buf)
	}
	// Capture's 0 is CallerPCs.
	n, walked := fpstack.Capture(skip+1, buf)
	if !walked && fpstack.Enabled() { // refused by a guard, not turned off by the operator
		t.stackFallbacks.Add(1)
	}
	return n
}
