package oteltrack_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/oteltrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

type fakePool struct{ stats pool.Stats }

func (p *fakePool) Stats() pool.Stats { return p.stats }

type fakeCache struct{ stats mask.CacheStats }

func (c *fakeCache) Stats() mask.CacheStats { return c.stats }

// gpu is a device that names its hardware, as the CUDA device does.
type gpu struct{ free, total int64 }

func (gpu) Name() string                     { return "cuda:0" }
func (gpu) UUID() string                     { return "GPU-5f2c" }
func (g gpu) MemInfo() (int64, int64, error) { return g.free, g.total, nil }

// siteDriver keeps n records of bytes live from one call site.
type siteDriver struct {
	tr    *track.Tracker
	bytes int64
	recs  []*track.Record
}

//go:noinline
func (d *siteDriver) setLive(t testing.TB, n int) {
	t.Helper()
	for len(d.recs) < n {
		r := &track.Record{Bytes: d.bytes, Meta: track.InternMeta("mask", "host", "bool", []int{int(d.bytes)})}
		require.NoError(t, d.tr.Books().Record(context.Background(), r, 1))
		d.recs = append(d.recs, r)
	}
	for len(d.recs) > n {
		require.NoError(t, (d.recs[len(d.recs)-1]).Release())
		d.recs = d.recs[:len(d.recs)-1]
	}
}

// brokenDevice cannot report its memory.
type brokenDevice struct{}

func (brokenDevice) Name() string { return "cuda:7" }
func (brokenDevice) MemInfo() (int64, int64, error) {
	return 0, 0, errors.New("driver not loaded")
}

// metricsReader returns a provider whose only reader is a ManualReader, and
// a function collecting it into name -> metric.
func metricsReader(t *testing.T) (*sdkmetric.MeterProvider, func() map[string]metricdata.Metrics) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, func() map[string]metricdata.Metrics {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		out := make(map[string]metricdata.Metrics)
		for _, sm := range rm.ScopeMetrics {
			if sm.Scope.Name != oteltrack.ScopeName {
				continue
			}
			assert.Equal(t, "devel", sm.Scope.Version, "a work-tree build has no module version")
			for _, m := range sm.Metrics {
				out[m.Name] = m
			}
		}
		return out
	}
}

// instrument is what a test expects of one instrument.
type instrument struct {
	unit   string
	kind   string           // "counter", "updown" or "gauge"
	points map[string]int64 // encoded attributes -> value
}

func pointsOf(t *testing.T, m metricdata.Metrics) (string, map[string]int64) {
	t.Helper()
	var kind string
	var dps []metricdata.DataPoint[int64]
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		kind = "updown"
		if d.IsMonotonic {
			kind = "counter"
		}
		assert.Equal(t, metricdata.CumulativeTemporality, d.Temporality, m.Name)
		dps = d.DataPoints
	case metricdata.Gauge[int64]:
		kind, dps = "gauge", d.DataPoints
	default:
		t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
	}
	allowed := []attribute.Key{"tensorlife.device", "tensorlife.tensor.kind", "tensorlife.cache.name", "tensorlife.forecast.memory",
		"tensorlife.pool.memory.state", "tensorlife.device.memory.state", "hw.id", "hw.type"}
	points := make(map[string]int64, len(dps))
	for _, dp := range dps {
		for _, kv := range dp.Attributes.ToSlice() {
			assert.Contains(t, allowed, kv.Key, "%s carries a high-cardinality attribute", m.Name)
		}
		points[dp.Attributes.Encoded(attribute.DefaultEncoder())] = dp.Value
	}
	return kind, points
}

func TestMetricsReadEveryInstrument(t *testing.T) {
	tr, err := track.New(track.Name("metrics"), track.OnLeak(func(track.LeakReport) {}))
	require.NoError(t, err)
	ctx := context.Background()

	// Tensors on a host device of 64 KiB.
	dev, err := tensor.NewHostDevice(64 << 10)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	var tensors []*tensor.Tensor
	for range 3 {
		x, err := tensor.New(ctx, alloc, tensor.Float32, 256) // 1 KiB
		require.NoError(t, err)
		tensors = append(tensors, x)
	}
	for range 2 {
		m, err := tensor.Make(ctx, alloc, tensor.Spec{DType: tensor.Bool, Shape: tensor.Shape{16, 16}, Kind: "mask"})
		require.NoError(t, err)
		tensors = append(tensors, m)
	}
	require.NoError(t, tensors[2].Free())
	err, _ = invariants.Recover(tensors[2].Free)
	require.ErrorIs(t, err, tensor.ErrDoubleFree)
	_, err = tensor.New(ctx, alloc, tensor.Float32, 1<<20)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)

	// A KV-cache block on another device that the GC found leaked.
	kv := &track.Record{Bytes: 4096, Meta: track.InternMeta("kv-cache", "cuda:0", "float16", []int{2048})}
	require.NoError(t, tr.Books().Record(ctx, kv, 0))
	require.True(t, kv.ReportDropped(nil, ""))
	tr.Books().Note(track.EventMaskRebuilt, nil, 256)
	tr.Books().Note(track.EventMaskRebuilt, nil, 256)

	// A site the watcher flags: one 512-byte mask kept per window.
	w, err := watch.New(tr, watch.MinGrowth(0), watch.OnSuspect(func(watch.Suspect) {}))
	require.NoError(t, err)
	leak := &siteDriver{tr: tr, bytes: 512}
	for win := 1; win <= 6; win++ {
		leak.setLive(t, win)
		require.NoError(t, w.Tick())
	}
	require.Len(t, w.Suspects(), 1)

	pools := []report.PoolSource{
		&fakePool{pool.Stats{Device: "host", Reserved: 8192, Active: 4096, Cached: 4096, Limit: 65536,
			Hits: 10, Misses: 2, Evictions: 1, OOMs: 1}},
		&fakePool{pool.Stats{Device: "host", Reserved: 1024, Active: 1024, Hits: 1, Misses: 1}},
		&fakePool{pool.Stats{Device: "cuda:0", Reserved: 2048, Cached: 2048, Misses: 1}},
	}
	cache := &fakeCache{mask.CacheStats{Name: "masks", Bytes: 512, Entries: 2, MaxBytes: 1 << 20,
		Hits: 7, Misses: 3, Evictions: 1}}

	mp, collect := metricsReader(t)
	m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp), oteltrack.WithSources(report.Sources{
		Pools: pools, Caches: []report.CacheSource{cache},
		Devices: []report.DeviceSource{dev, brokenDevice{}, gpu{free: 60 << 30, total: 80 << 30}}}))
	defer runtime.KeepAlive(w) // found on the tracker, which holds it weakly
	require.NoError(t, err)

	const (
		hostTensor = "tensorlife.device=host,tensorlife.tensor.kind=tensor"
		hostMask   = "tensorlife.device=host,tensorlife.tensor.kind=mask"
		cudaKV     = "tensorlife.device=cuda:0,tensorlife.tensor.kind=kv-cache"
		host       = "tensorlife.device=host"
		cuda       = "tensorlife.device=cuda:0"
	)
	want := map[string]instrument{
		"tensorlife.tensor.live": {"{tensor}", "updown", map[string]int64{hostTensor: 2, hostMask: 2 + 6, cudaKV: 1}},
		"tensorlife.tensor.memory.usage": {"By", "updown",
			map[string]int64{hostTensor: 2048, hostMask: 2*256 + 6*512, cudaKV: 4096}},
		"tensorlife.tensor.memory.peak": {"By", "gauge", map[string]int64{"": 9728}},
		// Everything was made under no request: it all counts as outlived.
		"tensorlife.tensor.memory.outlived":   {"By", "updown", map[string]int64{"": 9728}},
		"tensorlife.tensor.memory.allocated":  {"By", "counter", map[string]int64{"": 3*1024 + 2*256 + 4096 + 6*512}},
		"tensorlife.tensor.allocations":       {"{allocation}", "counter", map[string]int64{"": 5 + 1 + 6}},
		"tensorlife.tensor.frees":             {"{free}", "counter", map[string]int64{"": 1}},
		"tensorlife.tensor.leaks":             {"{tensor}", "counter", map[string]int64{"": 1}},
		"tensorlife.tensor.leak_reports_lost": {"{report}", "counter", map[string]int64{"": 0}},
		"tensorlife.tensor.double_frees":      {"{free}", "counter", map[string]int64{"": 1}},
		"tensorlife.tensor.oom_errors":        {"{error}", "counter", map[string]int64{"": 1}},
		"tensorlife.mask.rebuilds":            {"{mask}", "counter", map[string]int64{"": 2}},
		"tensorlife.stack.fallbacks":          {"{capture}", "counter", map[string]int64{"": 0}},
		"tensorlife.stack.uncached":           {"{capture}", "counter", map[string]int64{"": 0}},
		"tensorlife.tensor.free_lines_lost":   {"{free}", "counter", map[string]int64{"": 0}},
		"tensorlife.part.panics":              {"{call}", "counter", map[string]int64{"": 0}},
		// No request is open: tested with some in TestMetricsOpenRequests.
		"tensorlife.request.open":                     {"{request}", "updown", map[string]int64{"": 0}},
		"tensorlife.request.memory.in_flight":         {"By", "updown", map[string]int64{"": 0}},
		"tensorlife.request.oldest.age":               {"s", "gauge", map[string]int64{"": 0}},
		"tensorlife.request.largest.memory.in_flight": {"By", "gauge", map[string]int64{"": 0}},
		"tensorlife.pool.memory.usage": {"By", "updown", map[string]int64{
			host + ",tensorlife.pool.memory.state=active": 5120, host + ",tensorlife.pool.memory.state=cached": 4096,
			cuda + ",tensorlife.pool.memory.state=active": 0, cuda + ",tensorlife.pool.memory.state=cached": 2048}},
		"tensorlife.pool.memory.limit":       {"By", "updown", map[string]int64{host: 65536}},
		"tensorlife.pool.hits":               {"{allocation}", "counter", map[string]int64{host: 11, cuda: 0}},
		"tensorlife.pool.misses":             {"{allocation}", "counter", map[string]int64{host: 3, cuda: 1}},
		"tensorlife.pool.evictions":          {"{block}", "counter", map[string]int64{host: 1, cuda: 0}},
		"tensorlife.pool.oom_errors":         {"{error}", "counter", map[string]int64{host: 1, cuda: 0}},
		"tensorlife.mask.cache.memory.usage": {"By", "updown", map[string]int64{"tensorlife.cache.name=masks": 512}},
		"tensorlife.mask.cache.memory.limit": {"By", "updown", map[string]int64{"tensorlife.cache.name=masks": 1 << 20}},
		"tensorlife.mask.cache.entry.live":   {"{entry}", "updown", map[string]int64{"tensorlife.cache.name=masks": 2}},
		"tensorlife.mask.cache.hits":         {"{lookup}", "counter", map[string]int64{"tensorlife.cache.name=masks": 7}},
		"tensorlife.mask.cache.misses":       {"{lookup}", "counter", map[string]int64{"tensorlife.cache.name=masks": 3}},
		"tensorlife.mask.cache.evictions":    {"{entry}", "counter", map[string]int64{"tensorlife.cache.name=masks": 1}},
		"tensorlife.device.memory.usage": {"By", "updown", map[string]int64{
			// The fake host pool claims more than the device has used: what
			// tensorlife holds is capped at used, and nothing is outside.
			host + ",tensorlife.device.memory.state=tensorlife": 2*1024 + 2*256, host + ",tensorlife.device.memory.state=outside": 0,
			host + ",tensorlife.device.memory.state=free":       64<<10 - 2*1024 - 2*256,
			cuda + ",tensorlife.device.memory.state=tensorlife": 2048, cuda + ",tensorlife.device.memory.state=outside": 20<<30 - 2048,
			cuda + ",tensorlife.device.memory.state=free": 60 << 30}},
		"tensorlife.device.memory.limit":    {"By", "updown", map[string]int64{host: 64 << 10, cuda: 80 << 30}},
		"hw.gpu.memory.usage":               {"By", "updown", map[string]int64{"hw.id=GPU-5f2c,hw.type=gpu": 20 << 30}},
		"hw.gpu.memory.limit":               {"By", "updown", map[string]int64{"hw.id=GPU-5f2c,hw.type=gpu": 80 << 30}},
		"tensorlife.watcher.suspect.active": {"{site}", "updown", map[string]int64{"": 1}},
		"tensorlife.watcher.flags":          {"{site}", "counter", map[string]int64{"": 1}},
		"tensorlife.watcher.windows":        {"{window}", "counter", map[string]int64{"": 6}},
		// Its value is the real time the windows took: checked on fake
		// time in TestMetricsForecast.
		"tensorlife.watcher.suspect.runs_out_in": {"s", "gauge", nil},
	}

	got := collect()
	gotNames := slices.Sorted(func(yield func(string) bool) {
		for name := range got {
			if !yield(name) {
				return
			}
		}
	})
	wantNames := slices.Sorted(func(yield func(string) bool) {
		for name := range want {
			if !yield(name) {
				return
			}
		}
	})
	require.Equal(t, wantNames, gotNames, "every instrument, and no other")
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			m := got[name]
			assert.Equal(t, w.unit, m.Unit)
			assert.NotEmpty(t, m.Description)
			kind, points := pointsOf(t, m)
			assert.Equal(t, w.kind, kind)
			if w.points != nil {
				assert.Equal(t, w.points, points)
			}
		})
	}

	t.Run("a class with nothing live is no series", func(t *testing.T) {
		for _, x := range tensors {
			if !x.Freed() {
				require.NoError(t, x.Free())
			}
		}
		_, points := pointsOf(t, collect()["tensorlife.tensor.memory.usage"])
		assert.Equal(t, map[string]int64{hostMask: 6 * 512, cudaKV: 4096}, points,
			"the series of a class whose tensors were all freed goes, as the bound on series needs")
	})

	t.Run("stop", func(t *testing.T) {
		require.NoError(t, m.Stop())
		assert.Empty(t, collect(), "no instrument reports after Stop")
		assert.ErrorIs(t, m.Stop(), oteltrack.ErrStopped)
	})
}

func TestMetricsOnlyForSourcesGiven(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	mp, collect := metricsReader(t)
	m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Stop()) }()
	for name := range collect() {
		assert.Regexp(t, `^tensorlife\.(tensor\.|request\.|mask\.rebuilds|stack\.(fallbacks|uncached)|part\.panics)`, name)
	}
}

func TestMetricsDefaultProvider(t *testing.T) {
	prev := otel.GetMeterProvider()
	defer otel.SetMeterProvider(prev)
	mp, collect := metricsReader(t)
	otel.SetMeterProvider(mp)

	tr, err := track.New()
	require.NoError(t, err)
	rec := &track.Record{Bytes: 100, Meta: track.InternMeta("tensor", "host", "", nil)}
	require.NoError(t, tr.Books().Record(context.Background(), rec, 0))
	m, err := oteltrack.Register(tr)
	require.NoError(t, err)
	_, points := pointsOf(t, collect()["tensorlife.tensor.memory.usage"])
	assert.Equal(t, map[string]int64{"tensorlife.device=host,tensorlife.tensor.kind=tensor": 100}, points)
	require.NoError(t, m.Stop())
}

func TestMetricsRejectBadInput(t *testing.T) {
	tr, err := track.New(track.Name("one"))
	require.NoError(t, err)

	tests := []struct {
		name string
		opts []oteltrack.Option
	}{
		{"nil provider", []oteltrack.Option{oteltrack.WithMeterProvider(nil)}},
		{"nil option", []oteltrack.Option{nil}},
		{"nil pool", []oteltrack.Option{oteltrack.WithSources(report.Sources{Pools: []report.PoolSource{nil}})}},
		{"typed nil pool", []oteltrack.Option{oteltrack.WithSources(report.Sources{Pools: []report.PoolSource{(*fakePool)(nil)}})}},
		{"nil cache", []oteltrack.Option{oteltrack.WithSources(report.Sources{Caches: []report.CacheSource{nil}})}},
		{"nil device", []oteltrack.Option{oteltrack.WithSources(report.Sources{Devices: []report.DeviceSource{nil}})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := oteltrack.Register(tr, tt.opts...)
			assert.ErrorIs(t, err, oteltrack.ErrInvalidOption)
			assert.Nil(t, m)
		})
	}
	t.Run("nil tracker", func(t *testing.T) {
		_, err := oteltrack.Register(nil)
		assert.ErrorIs(t, err, track.ErrNilTracker)
	})
}

func ExampleRegister() {
	tr, err := track.New()
	if err != nil {
		panic(err)
	}
	// A service would pass its exporter's provider, or none for the global.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	defer m.Stop()

	mask := &track.Record{Bytes: 4096, Meta: track.InternMeta("mask", "cuda:0", "bool", []int{64, 64})}
	if err := tr.Books().Record(context.Background(), mask, 0); err != nil {
		panic(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, metric := range rm.ScopeMetrics[0].Metrics {
		if metric.Name != "tensorlife.tensor.memory.usage" {
			continue
		}
		for _, dp := range metric.Data.(metricdata.Sum[int64]).DataPoints {
			fmt.Println(metric.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value, metric.Unit)
		}
	}
	// Output:
	// tensorlife.tensor.memory.usage tensorlife.device=cuda:0,tensorlife.tensor.kind=mask 4096 By
}

// The forecast gauge is the shortest forecast of the suspects per device,
// in seconds: on fake time, a leak of 512 B a second into a host device's
// free memory.
func TestMetricsForecast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, err := track.New()
		require.NoError(t, err)
		dev, err := tensor.NewHostDevice(1 << 20)
		require.NoError(t, err)
		alloc, err := tensor.NewDeviceAllocator(dev, tr) // reaches the device's free memory
		require.NoError(t, err)
		w, err := watch.New(tr, watch.MinGrowth(0), watch.OnSuspect(func(watch.Suspect) {}))
		require.NoError(t, err)
		leak := &siteDriver{tr: tr, bytes: 512}
		for win := 1; win <= 8; win++ {
			<-time.After(time.Second)
			leak.setLive(t, win)
			require.NoError(t, w.Tick())
		}
		s := w.Suspects()
		require.Len(t, s, 1)
		require.Positive(t, s[0].RunsOutIn)
		mp, collect := metricsReader(t)
		m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp)) // the watcher attached itself to tr
		require.NoError(t, err)
		defer func() { require.NoError(t, m.Stop()) }()
		_, points := pointsOf(t, collect()["tensorlife.watcher.suspect.runs_out_in"])
		assert.Equal(t, map[string]int64{"tensorlife.device=host,tensorlife.forecast.memory=device memory": 2048}, points,
			"1 MiB free at 512 B/s")
		runtime.KeepAlive(w) // the tracker holds its parts weakly
		runtime.KeepAlive(alloc)
		leak.setLive(t, 0)
	})
}

// The open requests' count, their in-flight bytes, the oldest one's age and
// the largest one's bytes, on the tracker's clock.
func TestMetricsOpenRequests(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tr, err := track.New(track.Clock(func() time.Time { return now }))
	require.NoError(t, err)
	mp, collect := metricsReader(t)
	m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Stop()) }()

	var recs []*track.Record
	var ends []context.CancelFunc
	for i, bytes := range []int64{4096, 1 << 20, 512} {
		ctx, end := track.WithRequest(context.Background())
		ends = append(ends, end)
		r := &track.Record{Bytes: bytes, Meta: track.InternMeta("kv-cache", "host", "", nil)}
		require.NoError(t, tr.Books().Record(track.WithLabels(ctx, "route", fmt.Sprint("/r", i)), r, 0))
		recs = append(recs, r)
		now = now.Add(time.Minute)
	}
	value := func(got map[string]metricdata.Metrics, name string) int64 {
		_, points := pointsOf(t, got[name])
		return points[""]
	}
	got := collect()
	assert.Equal(t, int64(3), value(got, "tensorlife.request.open"))
	assert.Equal(t, int64(4096+1<<20+512), value(got, "tensorlife.request.memory.in_flight"))
	assert.Equal(t, int64(180), value(got, "tensorlife.request.oldest.age"))
	assert.Equal(t, int64(1<<20), value(got, "tensorlife.request.largest.memory.in_flight"))

	for _, end := range ends {
		end()
	}
	got = collect()
	assert.Zero(t, value(got, "tensorlife.request.open"), "ended requests are open no more")
	for _, r := range recs {
		require.NoError(t, r.Release())
	}
}

// The peaks of ended requests are a histogram per request kind and device,
// each request counted once however many collections read it.
func TestMetricsRequestPeaks(t *testing.T) {
	tr, err := track.New(track.RequestKinds("route"))
	require.NoError(t, err)
	mp, collect := metricsReader(t)
	m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Stop()) }()

	serve := func(route string, bytes int64) {
		ctx, end := track.WithRequest(context.Background())
		r := &track.Record{Bytes: bytes, Meta: track.InternMeta("kv-cache", "host", "", nil)}
		require.NoError(t, tr.Books().Record(track.WithLabels(ctx, "route", route), r, 0))
		require.NoError(t, r.Release())
		end()
	}
	for range 3 {
		serve("/generate", 1<<20) // exactly a power of two
	}
	serve("/generate", 3<<20)
	serve("/embed", 4096)
	peaks := func() map[string]metricdata.HistogramDataPoint[int64] {
		got := collect()["tensorlife.request.memory.peak"]
		h, ok := got.Data.(metricdata.Histogram[int64])
		require.True(t, ok, "%T", got.Data)
		assert.Equal(t, "By", got.Unit)
		out := map[string]metricdata.HistogramDataPoint[int64]{}
		for _, dp := range h.DataPoints {
			out[dp.Attributes.Encoded(attribute.DefaultEncoder())] = dp
		}
		return out
	}
	got := peaks()
	gen := got["tensorlife.device=host,tensorlife.request.kind=route\\=/generate"]
	assert.Equal(t, uint64(4), gen.Count)
	gotMax, _ := gen.Max.Value()
	assert.Equal(t, int64(3<<20), gotMax)
	// 1 MiB is in the bucket (1 MiB-1, 2 MiB-1], the 12th of 1 KiB-1 on.
	assert.Equal(t, uint64(3), gen.BucketCounts[11])
	assert.Equal(t, uint64(1), gen.BucketCounts[12])
	assert.Equal(t, uint64(1), got["tensorlife.device=host,tensorlife.request.kind=route\\=/embed"].Count)

	serve("/embed", 4096)
	got = peaks()
	assert.Equal(t, uint64(4), got["tensorlife.device=host,tensorlife.request.kind=route\\=/generate"].Count, "counted once")
	assert.Equal(t, uint64(2), got["tensorlife.device=host,tensorlife.request.kind=route\\=/embed"].Count)
}
