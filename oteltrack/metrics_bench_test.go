package oteltrack_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/oteltrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// liveTracker returns a tracker holding n live records over a few devices
// and kinds, and a reader collecting its metrics.
func liveTracker(b *testing.B, n int) *sdkmetric.ManualReader {
	b.Helper()
	tr, err := track.New()
	if err != nil {
		b.Fatal(err)
	}
	kinds := []string{"tensor", "mask", "kv-cache", "activation"}
	devices := []string{"cuda:0", "cuda:1"}
	ctx := context.Background()
	recs := make([]track.Record, n)
	for i := range recs {
		recs[i] = track.Record{Bytes: 256, Meta: track.InternMeta(kinds[i%len(kinds)], devices[i%len(devices)], "", nil)}
		if err := tr.Books().Record(ctx, &recs[i], 0); err != nil {
			b.Fatal(err)
		}
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	w, err := watch.New(tr)
	if err != nil {
		b.Fatal(err)
	}
	_, err = oteltrack.Register(tr, oteltrack.WithMeterProvider(mp), oteltrack.WithSources(report.Sources{
		Pools:  []report.PoolSource{&fakePool{pool.Stats{Device: "cuda:0", Reserved: 1 << 20}}},
		Caches: []report.CacheSource{&fakeCache{mask.CacheStats{Name: "masks"}}},
	})) // the watcher is found on the tracker
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		runtime.KeepAlive(w)
		for i := range recs {
			_ = (&recs[i]).Release()
		}
	})
	return reader
}

// BenchmarkCollect measures one collection at 10k and at 1M live tensors,
// interleaved in rounds so that both see the same machine, and reports the
// median per-round ratio (flat: about 1) and the time of a collection at 1M.
// A collection reads counters only, so the live set's size must not show.
func BenchmarkCollect(b *testing.B) {
	small, large := liveTracker(b, 10_000), liveTracker(b, 1_000_000)
	collect := func(r *sdkmetric.ManualReader, rounds int) time.Duration {
		start := time.Now()
		for range rounds {
			var rm metricdata.ResourceMetrics
			if err := r.Collect(context.Background(), &rm); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	const perRound = 20
	var ratios []float64
	var largeTotal time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var s, l time.Duration
		if i%2 == 0 {
			s, l = collect(small, perRound), collect(large, perRound)
		} else {
			l, s = collect(large, perRound), collect(small, perRound)
		}
		ratios = append(ratios, float64(l)/float64(s))
		largeTotal += l
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x-1M/10k")
	b.ReportMetric(float64(largeTotal.Nanoseconds())/float64(len(ratios)*perRound), "ns/collect-1M")
}

// openTracker returns a reader collecting the metrics of a tracker with
// open requests, each begun by WithLabels on a cancellable context and
// holding one tensor, with a watcher and request kinds.
func openTracker(b *testing.B, open int) *sdkmetric.ManualReader {
	b.Helper()
	tr, err := track.New(track.RequestKinds("route"))
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]track.Record, open)
	cancels := make([]context.CancelFunc, open)
	for i := range recs {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		ctx = track.WithLabels(ctx, "route", fmt.Sprint("/r", i%8), "request", fmt.Sprint(i))
		recs[i] = track.Record{Bytes: 256, Meta: track.InternMeta("kv-cache", "cuda:0", "", nil)}
		if err := tr.Books().Record(ctx, &recs[i], 0); err != nil {
			b.Fatal(err)
		}
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	w, err := watch.New(tr)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		runtime.KeepAlive(w)
		for i := range recs {
			cancels[i]()
			_ = (&recs[i]).Release()
		}
	})
	return reader
}

// BenchmarkCollectOpenRequests is one collection with 10k requests open
// against one with 100, in alternating rounds (goal: x-10k-open at most
// 1.5): a collection reads the open requests' figures from the book the
// tracker keeps, never from each open request.
func BenchmarkCollectOpenRequests(b *testing.B) {
	few, many := openTracker(b, 100), openTracker(b, 10_000)
	collect := func(r *sdkmetric.ManualReader) func() {
		return func() {
			var rm metricdata.ResourceMetrics
			if err := r.Collect(context.Background(), &rm); err != nil {
				b.Fatal(err)
			}
		}
	}
	benchratio.Run(b, "10k-open", collect(many), collect(few), benchratio.BaselineName("100-open"), benchratio.RoundOps(20))
}
