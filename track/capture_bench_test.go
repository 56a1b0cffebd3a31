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

// newLike and recordLike stand for tensor.New and the function it records
// from: Record is called two frames below the allocating line, with the
// skip tensor.New passes, so the walk goes through the same frames as a
// tracked tensor.New's and the site starts at the line that called it.
//
//go:noinline
func newLike(ctx context.Context, tr *track.Tracker, r *track.Record) error {
	return recordLike(ctx, tr, r, 1)
}

//go:noinline
func recordLike(ctx context.Context, tr *track.Tracker, r *track.Record, skip int) error {
	return tr.Books().Record(ctx, r, skip+1)
}

// BenchmarkRecordReleaseRatio compares a Record and Release with one
// runtime.Callers over the same frames, interleaved in rounds, benchDepth
// frames below the loop: the tracker's whole cost against the stack capture
// it replaces. Record is reached as tensor.New reaches it (newLike), and
// the baseline is called where newLike is, so both capture the same frames
// (reported as "frames"). Records come from a reused slice, as package
// tensor embeds them in blocks it allocates anyway.
func BenchmarkRecordReleaseRatio(b *testing.B) {
	for _, tc := range []struct {
		name    string
		opts    []track.Option
		request bool
	}{
		{"framepointers", nil, false},
		{"framepointers-under-request", nil, true},
		{"callers", []track.Option{track.FramePointers(false)}, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tr, err := track.New(tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if tc.request {
				var end func()
				ctx, end = track.WithRequest(track.WithLabels(ctx, "request", "r1"))
				defer end()
			}
			// The Meta is interned once, as every tensor of one kind,
			// device, dtype and shape shares it: the caller's cost, not
			// the tracker's.
			meta := track.InternMeta("tensor", "host", "float32", []int{32, 32})
			recs := make([]track.Record, 4096)
			next := len(recs)
			var buf [32]uintptr
			frames := 0
			measured := func() {
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
			baseline := func() { frames = callersBaseline(&buf) }
			descend(benchDepth, func() {
				benchratio.Run(b, "callers", measured, baseline)
			})
			b.ReportMetric(float64(frames), "frames")
		})
	}
}

// BenchmarkRequestPerTensor runs one request that records 1000 tensors,
// ends with all of them live and then releases them, against 100 requests
// of 10 tensors each: the same tensors, in requests 100 times larger.
// Recording joins a request and its end flags each tensor it still holds in
// O(1), so the ratio stays near 1.
func BenchmarkRequestPerTensor(b *testing.B) {
	tr, err := track.New()
	if err != nil {
		b.Fatal(err)
	}
	meta := track.InternMeta("kv", "host", "float16", nil)
	recs := make([]track.Record, 1000)
	requests := func(n int) func() {
		return func() {
			clear(recs)
			for start := 0; start < len(recs); start += n {
				ctx, end := track.WithRequest(context.Background())
				for j := start; j < start+n; j++ {
					recs[j].Bytes, recs[j].Meta = 64, meta
					if err := tr.Books().Record(ctx, &recs[j], 0); err != nil {
						b.Fatal(err)
					}
				}
				end()
			}
			for j := range recs {
				if err := (&recs[j]).Release(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	benchratio.Run(b, "1-request-of-1000", requests(1000), requests(10), benchratio.BaselineName("100-requests-of-10"),
		benchratio.RoundOps(4))
}
