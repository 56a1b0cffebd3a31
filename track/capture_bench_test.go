package track_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/track"
)

// callersBaseline captures the same frames Record names: those from its
// caller up, 32 at most.
//
//go:noinline
func callersBaseline(buf *[32]uintptr) int { return runtime.Callers(2, buf[:]) }

// BenchmarkRecordReleaseRatio compares a Record and Release with one
// runtime.Callers over the same frames, interleaved in rounds, benchDepth
// frames below the loop: the tracker's whole cost against the stack capture
// it replaces. Records come from a reused slice, as package tensor embeds
// them in blocks it allocates anyway.
func BenchmarkRecordReleaseRatio(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []track.Option
	}{{"framepointers", nil}, {"callers", []track.Option{track.FramePointers(false)}}} {
		b.Run(tc.name, func(b *testing.B) {
			tr, err := track.New(tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			// The Meta is interned once, as every tensor of one kind,
			// device, dtype and shape shares it: the caller's cost, not
			// the tracker's.
			meta := track.InternMeta("tensor", "host", "float32", []int{32, 32})
			recs := make([]track.Record, 4096)
			next := len(recs)
			var buf [32]uintptr
			measured := func() {
				if next == len(recs) {
					clear(recs)
					next = 0
				}
				r := &recs[next]
				next++
				r.Bytes, r.Meta = 4096, meta
				if err := tr.Record(ctx, r, 0); err != nil {
					b.Fatal(err)
				}
				if err := tr.Release(r); err != nil {
					b.Fatal(err)
				}
			}
			baseline := func() { callersBaseline(&buf) }
			descend(benchDepth, func() {
				benchratio.Run(b, "callers", measured, baseline)
			})
		})
	}
}
