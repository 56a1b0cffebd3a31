package pool_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
)

// callersBaseline captures the frames tensor.New records, those from its
// caller up, 32 at most: called where New is called, it walks the same
// stack.
//
//go:noinline
func callersBaseline(buf *[32]uintptr) int { return runtime.Callers(2, buf[:]) }

// BenchmarkTrackedNewFreeRatio compares a tracked tensor.New+Free through a
// warm pool with one runtime.Callers over the same frames, interleaved in
// rounds benchDepth frames below the loop (goal: x-newfree <= 0.75).
func BenchmarkTrackedNewFreeRatio(b *testing.B) {
	p := benchPool(b, pool.WithTracker(benchTracker(b)))
	ctx := context.Background()
	var buf [32]uintptr
	measured := func() {
		x, err := tensor.New(ctx, p, tensor.Uint8, benchBytes)
		if err != nil {
			b.Fatal(err)
		}
		if err := x.Free(); err != nil {
			b.Fatal(err)
		}
	}
	measured() // warm the pool
	baseline := func() { callersBaseline(&buf) }
	descend(benchDepth, func() {
		benchratio.Run(b, "newfree", measured, baseline, benchratio.BaselineName("callers"))
	})
}

// watched is the floor's handle: 64 B, as small as an owned handle gets.
type watched struct {
	_ [64]byte
}

var watchedSink *watched

func noteDropped(int) {}

// BenchmarkUntrackedNewFreeRatio compares an untracked tensor.New+Free
// through a warm pool with the floor of any owned, GC-watched handle: one
// 64 B allocation with runtime.AddCleanup, then Stop (goal: x-newfree <= 1.3).
func BenchmarkUntrackedNewFreeRatio(b *testing.B) {
	p := benchPool(b, pool.WithoutTracking())
	ctx := context.Background()
	measured := func() {
		x, err := tensor.New(ctx, p, tensor.Uint8, benchBytes)
		if err != nil {
			b.Fatal(err)
		}
		if err := x.Free(); err != nil {
			b.Fatal(err)
		}
	}
	measured() // warm the pool
	floor := func() {
		h := new(watched)
		c := runtime.AddCleanup(h, noteDropped, 0)
		watchedSink = h
		c.Stop()
	}
	benchratio.Run(b, "newfree", measured, floor, benchratio.BaselineName("floor"))
}
