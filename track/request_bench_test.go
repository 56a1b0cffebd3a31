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
// and no request ("x-labelled"), and against one begun by WithRequest
// ("x-withrequest" in its own sub-benchmark): what beginning and ending a
// request costs a service, the tensors included. Each tensor is recorded
// benchDepth frames down, as in BenchmarkRecordRelease.
func BenchmarkWithLabelsRequestRatio(b *testing.B) {
	tr, err := track.New()
	if err != nil {
		b.Fatal(err)
	}
	meta := track.InternMeta("tensor", "host", "float32", []int{32, 32})
	var recs [8]track.Record
	serve := func(ctx context.Context) {
		for i := range recs {
			recs[i] = track.Record{Bytes: 4096, Meta: meta}
			if err := tr.Record(ctx, &recs[i], 0); err != nil {
				b.Fatal(err)
			}
		}
		for i := range recs {
			if err := tr.Release(&recs[i]); err != nil {
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
	explicit := func() {
		ctx, end := track.WithRequest(context.Background())
		serve(track.WithLabels(ctx, "request", "r1"))
		end()
	}
	b.Run("vs-plain", func(b *testing.B) {
		descend(benchDepth, func() { benchratio.Run(b, "labelled", labelled, plain, benchratio.BaselineName("plain")) })
	})
	b.Run("vs-withrequest", func(b *testing.B) {
		descend(benchDepth, func() {
			benchratio.Run(b, "labelled", labelled, explicit, benchratio.BaselineName("withrequest"))
		})
	})
}
