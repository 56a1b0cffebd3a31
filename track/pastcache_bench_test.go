package track_test

import (
	"context"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/track"
)

// stackA and stackB spell out the low n bits of bits as a chain of calls,
// so that each number below 1<<n is a distinct call stack of n frames.
//
//go:noinline
func stackA(bits, n int, leaf func()) { stackOf(bits>>1, n-1, leaf) }

//go:noinline
func stackB(bits, n int, leaf func()) { stackOf(bits>>1, n-1, leaf) }

func stackOf(bits, n int, leaf func()) {
	switch {
	case n == 0:
		leaf()
	case bits&1 == 0:
		stackA(bits, n, leaf)
	default:
		stackB(bits, n, leaf)
	}
}

// BenchmarkRecordPastWalkCacheRatio is Record+Release from 1024 distinct
// stacks on a tracker of 64 sites, whose walk cache is full: each record
// falls back to runtime.Callers. The baseline is one runtime.Callers over
// the same frames from the same stacks (goal: no dearer than at 34bffc1,
// measured with this benchmark on both).
func BenchmarkRecordPastWalkCacheRatio(b *testing.B) {
	const stacks, depth = 1 << 10, 10
	tr, err := track.New(track.MaxSites(64))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	meta := track.InternMeta("tensor", "host", "float32", []int{32, 32})
	recs := make([]track.Record, 4096)
	next, i, j := 0, 0, 0
	record := func() {
		if next == len(recs) {
			clear(recs)
			next = 0
		}
		r := &recs[next]
		next++
		r.Bytes, r.Meta = 4096, meta
		if err := newLike(ctx, tr, r); err != nil {
			b.Fatal(err)
		}
		if err := r.Release(); err != nil {
			b.Fatal(err)
		}
	}
	var buf [32]uintptr
	callers := func() { callersBaseline(&buf) }
	for k := range stacks { // fill the caches
		stackOf(k, depth, record)
	}
	descend(benchDepth, func() {
		benchratio.Run(b, "callers", func() {
			stackOf(i%stacks, depth, record)
			i++
		}, func() {
			stackOf(j%stacks, depth, callers)
			j++
		})
	})
}
