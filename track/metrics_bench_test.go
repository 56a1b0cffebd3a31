package track_test

import (
	"context"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tensorlife/tensorlife/track"
)

// descendForMetrics calls leaf benchDepth frames down, as descend in
// record_bench_test.go does, so these benchmarks capture stacks as deep as
// BenchmarkRecordRelease's.
//
//go:noinline
func descendForMetrics(n int, leaf func()) {
	if n == 0 {
		leaf()
		return
	}
	descendForMetrics(n-1, leaf)
}

// recordReleaseLoop is BenchmarkRecordRelease's body.
func recordReleaseLoop(b *testing.B, tr *track.Tracker) {
	ctx := context.Background()
	shape := []int{32, 32}
	leaf := func() {
		for b.Loop() {
			rec := &track.Record{Bytes: 4096, Kind: "tensor", Device: "host", DType: "float32", Shape: shape}
			if err := tr.Record(ctx, rec, 0); err != nil {
				b.Fatal(err)
			}
			if err := tr.Release(rec); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	descendForMetrics(benchDepth, leaf)
}

// benchMetrics registers tr's metrics with pools, a cache and a watcher on
// an SDK provider, and returns its reader.
func benchMetrics(b *testing.B, tr *track.Tracker) *sdkmetric.ManualReader {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	w, err := track.NewWatcher(tr)
	if err != nil {
		b.Fatal(err)
	}
	m, err := track.RegisterMetrics(tr, track.WithMeterProvider(mp),
		track.WithPools(&fakePool{track.PoolStats{Device: "host", Reserved: 1 << 20}}),
		track.WithCaches(&fakeCache{track.CacheStats{Name: "masks"}}), track.WithWatcher(w))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = m.Stop()
		_ = mp.Shutdown(context.Background())
	})
	return reader
}

func newBenchTracker(b *testing.B) *track.Tracker {
	tr, err := track.New()
	if err != nil {
		b.Fatal(err)
	}
	return tr
}

// BenchmarkRecordReleaseNoMetrics is the baseline of the two below.
func BenchmarkRecordReleaseNoMetrics(b *testing.B) {
	recordReleaseLoop(b, newBenchTracker(b))
}

// BenchmarkRecordReleaseWithMetrics shows that registered metrics cost the
// allocation path nothing: the instruments are read only at collection.
func BenchmarkRecordReleaseWithMetrics(b *testing.B) {
	tr := newBenchTracker(b)
	benchMetrics(b, tr)
	recordReleaseLoop(b, tr)
}

// recordReleaseBatch records and releases n allocations in tr.
//
//go:noinline
func recordReleaseBatch(b *testing.B, tr *track.Tracker, n int) {
	ctx := context.Background()
	shape := []int{32, 32}
	for range n {
		rec := &track.Record{Bytes: 4096, Kind: "tensor", Device: "host", DType: "float32", Shape: shape}
		if err := tr.Record(ctx, rec, 0); err != nil {
			b.Fatal(err)
		}
		if err := tr.Release(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecordReleaseMetricsRatio interleaves batches on a tracker with
// metrics registered and one without, alternating which goes first, so both
// see the same machine load; it reports the ratio of their costs, which is
// the figure to read on a busy machine.
func BenchmarkRecordReleaseMetricsRatio(b *testing.B) {
	plain := newBenchTracker(b)
	metered := newBenchTracker(b)
	benchMetrics(b, metered)
	const batch = 256
	var withMetrics, without time.Duration
	leaf := func() {
		first := true
		for b.Loop() {
			trackers := [2]*track.Tracker{plain, metered}
			if !first {
				trackers[0], trackers[1] = metered, plain
			}
			first = !first
			for _, tr := range trackers {
				start := time.Now()
				recordReleaseBatch(b, tr, batch)
				if tr == metered {
					withMetrics += time.Since(start)
				} else {
					without += time.Since(start)
				}
			}
		}
	}
	b.ReportAllocs()
	descendForMetrics(benchDepth, leaf)
	n := float64(b.N * batch)
	b.ReportMetric(float64(without.Nanoseconds())/n, "ns/op-without")
	b.ReportMetric(float64(withMetrics.Nanoseconds())/n, "ns/op-with")
	b.ReportMetric(float64(withMetrics)/float64(without), "with/without")
}

// BenchmarkRecordReleaseWhileCollecting records and releases while another
// goroutine collects every millisecond, a scrape rate far above any real
// one, with 10,000 other tensors live: the cost of the collection's walk of
// the live set to the allocation path.
func BenchmarkRecordReleaseWhileCollecting(b *testing.B) {
	tr := newBenchTracker(b)
	reader := benchMetrics(b, tr)
	keep := make([]*track.Record, 10000)
	for i := range keep {
		keep[i] = &track.Record{Bytes: 256, Kind: "mask", Device: "host"}
		if err := tr.Record(context.Background(), keep[i], 0); err != nil {
			b.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var collections int
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var rm metricdata.ResourceMetrics
				if err := reader.Collect(context.Background(), &rm); err != nil {
					b.Error(err)
					return
				}
				collections++
			}
		}
	})
	recordReleaseLoop(b, tr)
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(collections)/b.Elapsed().Seconds(), "collections/s")
}

// BenchmarkCollect is the cost of one scrape with 10,000 live tensors over
// 4 devices and kinds: the walk of the live set dominates.
func BenchmarkCollect(b *testing.B) {
	tr := newBenchTracker(b)
	reader := benchMetrics(b, tr)
	kinds := []string{"tensor", "mask", "kv-cache", "logits"}
	for i := range 10000 {
		r := &track.Record{Bytes: 256, Kind: kinds[i%4], Device: "host"}
		if err := tr.Record(context.Background(), r, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var rm metricdata.ResourceMetrics
	for b.Loop() {
		if err := reader.Collect(context.Background(), &rm); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/live-tensor")
}

//go:noinline
func descendOther(n int, leaf func()) {
	if n == 0 {
		leaf()
		return
	}
	descendOther(n-1, leaf)
}

// BenchmarkWatcherTick is the cost of one window end over 100 sites, as an
// EveryTicks(1) watcher pays it once per request.
func BenchmarkWatcherTick(b *testing.B) {
	tr := newBenchTracker(b)
	const sites = 100
	for i := range sites {
		descendForMetrics(i/10, func() {
			descendOther(i%10, func() {
				r := &track.Record{Bytes: 256, Kind: "mask", Device: "host"}
				if err := tr.Record(context.Background(), r, 0); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
	if got := tr.Totals().Sites; got != sites {
		b.Fatalf("made %d sites, want %d", got, sites)
	}
	w, err := track.NewWatcher(tr)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Tick(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/sites, "ns/site")
}
