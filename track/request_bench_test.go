package track_test

import (
	"context"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/track"
)

// BenchmarkWithLabelsRequestRatio measures a request begun by WithLabels
// (a cancellable context, its labels, its tensors recorded and released,
// the cancel) against the same plain cancellable context with its tensors
// and no request ("vs-plain"), against the same context whose Done channel
// a handler made ("vs-plain-done"), and against one begun by WithRequest
// ("vs-withrequest"): what beginning and ending a request costs a service,
// the tensors included, its listing in the tracker's book and the sweep
// that finds its end. Each tensor is recorded benchDepth frames down, as in
// BenchmarkRecordRelease. On a 2-core machine loaded to 6 runnable
// goroutines a core, vs-plain read 1.34-1.48x with 8 tensors and 2.6-3.0x
// with 1 (goals 1.15 and 1.5, not met), as the design before the book did
// in the same runs (1.38-1.44x, 2.4-2.9x): most of it is WithLabels' own
// allocation and the request's per-site counts, not the book.
func BenchmarkWithLabelsRequestRatio(b *testing.B) {
	b.Run("8-tensors", func(b *testing.B) { benchWithLabelsRequest(b, 8) })
	b.Run("1-tensor", func(b *testing.B) { benchWithLabelsRequest(b, 1) })
}

// benchWithLabelsRequest is BenchmarkWithLabelsRequestRatio with tensors
// tensors a request (goal: x-labelled at most 1.15 vs-plain with 8, at
// most 1.5 with 1).
func benchWithLabelsRequest(b *testing.B, tensors int) {
	tr, err := track.New()
	if err != nil {
		b.Fatal(err)
	}
	meta := track.InternMeta("tensor", "host", "float32", []int{32, 32})
	recs := make([]track.Record, tensors)
	serve := func(ctx context.Context) {
		for i := range recs {
			recs[i] = track.Record{Bytes: 4096, Meta: meta}
			if err := tr.Books().Record(ctx, &recs[i], 0); err != nil {
				b.Fatal(err)
			}
		}
		for i := range recs {
			if err := (&recs[i]).Release(); err != nil {
				b.Fatal(err)
			}
		}
	}
	labelled := func() {
		ctx, cancel := context.WithCancel(context.Background())
		serve(track.WithLabels(ctx, "request", "r1"))
		cancel()
	}
	plain := func() {
		ctx, cancel := context.WithCancel(context.Background())
		serve(ctx)
		cancel()
	}
	// plainDone is plain for a service whose handlers select on the
	// context, as most do: the context's Done channel is made either way.
	plainDone := func() {
		ctx, cancel := context.WithCancel(context.Background())
		_ = ctx.Done()
		serve(ctx)
		cancel()
	}
	explicit := func() {
		ctx, end := track.WithRequest(context.Background())
		serve(track.WithLabels(ctx, "request", "r1"))
		end()
	}
	b.Run("vs-plain", func(b *testing.B) {
		descend(benchDepth, func() { benchratio.Run(b, "labelled", labelled, plain, benchratio.BaselineName("plain")) })
	})
	b.Run("vs-plain-done", func(b *testing.B) {
		descend(benchDepth, func() {
			benchratio.Run(b, "labelled", labelled, plainDone, benchratio.BaselineName("plain-done"))
		})
	})
	b.Run("vs-withrequest", func(b *testing.B) {
		descend(benchDepth, func() {
			benchratio.Run(b, "labelled", labelled, explicit, benchratio.BaselineName("withrequest"))
		})
	})
}
