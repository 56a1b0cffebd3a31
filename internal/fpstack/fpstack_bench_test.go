package fpstack_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/internal/fpstack"
)

// BenchmarkWalk measures a frame-pointer walk against runtime.Callers over
// the same frames: both run from closures called at the same place by the
// harness, start at their closure's frame (Walk(0) and runtime.Callers(1))
// and fill a buffer of depth PCs on a stack deeper than that. The setup
// checks that the two name the same logical frames, no more and no less.
func BenchmarkWalk(b *testing.B) { benchmarkCapture(b, "walk", fpstack.Walk) }

// BenchmarkCapture is BenchmarkWalk through Capture, which adds the
// fallback check and a call.
func BenchmarkCapture(b *testing.B) { benchmarkCapture(b, "capture", fpstack.Capture) }

// benchmarkCapture runs BenchmarkWalk's comparison for capture, Walk or
// Capture, which must not fall back.
func benchmarkCapture(b *testing.B, name string, capture func(skip int, buf []uintptr) (int, bool)) {
	for _, depth := range []int{15, 32} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			padded(depth+8, func() {
				buf := make([]uintptr, depth)
				measured := func() {
					if _, walked := capture(0, buf); !walked {
						b.Fatalf("%s fell back to runtime.Callers", name)
					}
				}
				callers := func() { runtime.Callers(1, buf) }
				checkSameFrames(b, depth,
					func(pcs []uintptr) int { n, _ := capture(0, pcs); return n },
					func(pcs []uintptr) int { return runtime.Callers(1, pcs) })
				benchratio.Run(b, name, measured, callers, benchratio.BaselineName("callers"))
			})
		})
	}
}

// checkSameFrames fails the benchmark unless both captures, taken as the
// benchmark takes them, fill depth PCs naming the same logical frames: the
// same stack, with no inlined or wrapper frame that one would count and
// the other not.
func checkSameFrames(b *testing.B, depth int, walk, callers func([]uintptr) int) {
	b.Helper()
	walked, called := make([]uintptr, depth), make([]uintptr, depth)
	walked = walked[:walk(walked)]
	called = called[:callers(called)]
	if len(walked) != depth || len(called) != depth {
		b.Fatalf("captured %d and %d PCs, want %d each", len(walked), len(called), depth)
	}
	w, c := logical(walked), logical(called)
	// The first frames are the two closures; the rest must be the same
	// functions (the lines of the calls differ).
	same := len(w) == len(c)
	for i := 1; same && i < len(w); i++ {
		same = w[i].Function == c[i].Function
	}
	if !same {
		b.Fatalf("captures differ:\nwalk:\n%sruntime.Callers:\n%s", dump(walked), dump(called))
	}
}
