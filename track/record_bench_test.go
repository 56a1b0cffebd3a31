package track_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/tensorlife/tensorlife/track"
)

// benchDepth is how deep below the benchmark loop the allocation happens,
// about the depth of a decode step inside an HTTP handler.
const benchDepth = 10

// descend calls leaf benchDepth frames down, so each stack capture walks the
// same number of frames in the benchmark and its baseline.
//
//go:noinline
func descend(n int, leaf func()) {
	if n == 0 {
		leaf()
		return
	}
	descend(n-1, leaf)
}

func BenchmarkRecordRelease(b *testing.B) { benchRecordRelease(b) }

// BenchmarkRecordReleaseHistory is BenchmarkRecordRelease with the event
// history on: two events (alloc and free) per iteration.
func BenchmarkRecordReleaseHistory(b *testing.B) { benchRecordRelease(b, track.KeepHistory(1<<16)) }

func benchRecordRelease(b *testing.B, opts ...track.Option) {
	tr, err := track.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	shape := []int{32, 32}
	leaf := func() {
		for b.Loop() {
			rec := &track.Record{Bytes: 4096, Meta: track.InternMeta("tensor", "host", "float32", shape)}
			if err := tr.Books().Record(ctx, rec, 0); err != nil {
				b.Fatal(err)
			}
			if err := rec.Release(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	descend(benchDepth, leaf)
}

// BenchmarkRecordReleasePreallocated is BenchmarkRecordRelease with the
// records' memory allocated before the timer starts, as package tensor
// provides it (a Record embedded in each tensor's block): the tracker's own
// work, without the Go allocation that belongs to the caller.
func BenchmarkRecordReleasePreallocated(b *testing.B) {
	tr, err := track.New()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	shape := []int{32, 32}
	recs := make([]track.Record, b.N)
	for i := range recs {
		recs[i].Bytes, recs[i].Meta = 4096, track.InternMeta("tensor", "host", "float32", shape)
	}
	leaf := func() {
		b.ResetTimer()
		for i := range recs {
			if err := tr.Books().Record(ctx, &recs[i], 0); err != nil {
				b.Fatal(err)
			}
			if err := (&recs[i]).Release(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	descend(benchDepth, leaf)
}

func BenchmarkCallersBaseline(b *testing.B) {
	var buf [32]uintptr
	var sink int
	leaf := func() {
		for b.Loop() {
			// Skip 1 starts at this closure, as Record's capture does.
			sink += runtime.Callers(1, buf[:])
		}
	}
	b.ReportAllocs()
	descend(benchDepth, leaf)
	_ = sink
}
