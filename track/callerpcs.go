package track

import (
	"runtime"

	"github.com/tensorlife/tensorlife/internal/fpstack"
)

// CallerPCs writes into buf the program counters of the caller's stack,
// leaf first, and returns how many it wrote; skip as in Caller: 0 starts
// at the function calling CallerPCs. It is the cheapest capture a tracker
// offers, for hot paths that keep a few frames and symbolize only if a
// report needs them (tensor's Free): it interns nothing and allocates
// nothing.
//
// The capture follows the tracker's FramePointers setting, as Record's
// does: a frame-pointer walk (falling back to runtime.Callers, and counted
// in Totals.StackFallbacks, when a guard refuses it), or runtime.Callers
// alone. A walk holds the physical frames, wrapper frames included (the
// closure of a defer statement, a method value's wrapper) and one PC per
// frame whatever was inlined into it; runtime.Callers holds logical ones.
// Both symbolize with runtime.CallersFrames; a caller that needs the same
// frames either way drops wrapper frames (fpstack.IsWrapper) when it
// symbolizes, so it should capture a frame more than it keeps. Every
// function skip passes over must not be inlined.
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
