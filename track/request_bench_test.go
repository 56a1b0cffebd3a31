package track_test

import (
	"context"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/track"
)

// BenchmarkWithLabelsRequestRatio measures a request begun by WithLabels
// (a cancellable context, its labels, 8 tensors recorded and released, the
// cancel) against the same plain cancellable context with its 8 tensors
// and no request ("x-labelled"; 1.16-1.17x on an idle 2-core machine, of
// which the context's Done channel, made for the request to be settled by,
// is about 0.04x), against the same context whose Done channel a handler
// made ("vs-plain-done": 1.12-1.13x), and against one begun by WithRequest
// ("vs-withrequest": 0.95-0.96x): what beginning and ending a request costs a service,
// the tensors included. Each tensor is recorded
// benchDepth frames down, as in BenchmarkRecordRelease.
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
			if err := tr.Record(ctx, &recs[i], 0); err != nil {
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
