package track_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

type fakePool struct{ stats track.PoolStats }

func (p *fakePool) PoolStats() track.PoolStats { return p.stats }

type fakeCache struct{ stats track.CacheStats }

func (c *fakeCache) CacheStats() track.CacheStats { return c.stats }

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
			if sm.Scope.Name != track.ScopeName {
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
	allowed := []attribute.Key{"device", "kind", "cache", "hw.id"}
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
	tr, err := track.New(track.WithName("metrics"), track.OnLeak(func(track.LeakReport) {}))
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
	require.ErrorIs(t, tensors[2].Free(), tensor.ErrDoubleFree)
	_, err = tensor.New(ctx, alloc, tensor.Float32, 1<<20)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)

	// A KV-cache block on another device that the GC found leaked.
	kv := &track.Record{Bytes: 4096, Kind: "kv-cache", Device: "cuda:0", DType: "float16", Shape: []int{2048}}
	require.NoError(t, tr.Record(ctx, kv, 0))
	require.True(t, tr.ReportLeak(kv))
	tr.Note(track.EventMaskRebuilt, nil, 256)
	tr.Note(track.EventMaskRebuilt, nil, 256)

	// A site the watcher flags: one 512-byte mask kept per window.
	w, err := track.NewWatcher(tr, track.MinGrowth(0), track.OnSuspect(func(track.Suspect) {}))
	require.NoError(t, err)
	leak := &siteDriver{tr: tr, bytes: 512}
	for win := 1; win <= 6; win++ {
		leak.setLive(t, win)
		require.NoError(t, w.Tick())
	}
	require.Len(t, w.Suspects(), 1)

	pools := []track.PoolSource{
		&fakePool{track.PoolStats{Device: "host", Reserved: 8192, Active: 4096, Cached: 4096, Limit: 65536,
			Hits: 10, Misses: 2, Evictions: 1, OOMs: 1}},
		&fakePool{track.PoolStats{Device: "host", Reserved: 1024, Active: 1024, Hits: 1, Misses: 1}},
		&fakePool{track.PoolStats{Device: "cuda:0", Reserved: 2048, Cached: 2048, Misses: 1}},
	}
	cache := &fakeCache{track.CacheStats{Name: "masks", Bytes: 512, Entries: 2, BudgetBytes: 1 << 20,
		Hits: 7, Misses: 3, Evictions: 1}}

	mp, collect := metricsReader(t)
	m, err := track.RegisterMetrics(tr, track.WithMeterProvider(mp), track.WithPools(pools...),
		track.WithCaches(cache), track.WithDevices(dev, brokenDevice{}), track.WithWatcher(w))
	require.NoError(t, err)

	const (
		hostTensor = "device=host,kind=tensor"
		hostMask   = "device=host,kind=mask"
		cudaKV     = "device=cuda:0,kind=kv-cache"
	)
	want := map[string]instrument{
		"tensorlife.tensors.live": {"{tensor}", "updown", map[string]int64{hostTensor: 2, hostMask: 2 + 6, cudaKV: 1}},
		"tensorlife.memory.live": {"By", "updown",
			map[string]int64{hostTensor: 2048, hostMask: 2*256 + 6*512, cudaKV: 4096}},
		"tensorlife.memory.peak":          {"By", "gauge", map[string]int64{"": 9728}},
		"tensorlife.memory.allocated":     {"By", "counter", map[string]int64{"": 3*1024 + 2*256 + 4096 + 6*512}},
		"tensorlife.allocations":          {"{allocation}", "counter", map[string]int64{"": 5 + 1 + 6}},
		"tensorlife.frees":                {"{free}", "counter", map[string]int64{"": 1}},
		"tensorlife.leaks.gc":             {"{tensor}", "counter", map[string]int64{"": 1}},
		"tensorlife.double_frees":         {"{event}", "counter", map[string]int64{"": 1}},
		"tensorlife.ooms":                 {"{event}", "counter", map[string]int64{"": 1}},
		"tensorlife.mask.rebuilds":        {"{event}", "counter", map[string]int64{"": 2}},
		"tensorlife.leak_suspects":        {"{site}", "counter", map[string]int64{"": 1}},
		"tensorlife.pool.memory.reserved": {"By", "updown", map[string]int64{"device=host": 9216, "device=cuda:0": 2048}},
		"tensorlife.pool.memory.active":   {"By", "updown", map[string]int64{"device=host": 5120, "device=cuda:0": 0}},
		"tensorlife.pool.memory.cached":   {"By", "updown", map[string]int64{"device=host": 4096, "device=cuda:0": 2048}},
		"tensorlife.pool.memory.limit":    {"By", "updown", map[string]int64{"device=host": 65536}},
		"tensorlife.pool.hits":            {"{allocation}", "counter", map[string]int64{"device=host": 11, "device=cuda:0": 0}},
		"tensorlife.pool.misses":          {"{allocation}", "counter", map[string]int64{"device=host": 3, "device=cuda:0": 1}},
		"tensorlife.pool.evictions":       {"{block}", "counter", map[string]int64{"device=host": 1, "device=cuda:0": 0}},
		"tensorlife.pool.ooms":            {"{event}", "counter", map[string]int64{"device=host": 1, "device=cuda:0": 0}},
		"tensorlife.mask_cache.memory":    {"By", "updown", map[string]int64{"cache=masks": 512}},
		"tensorlife.mask_cache.budget":    {"By", "updown", map[string]int64{"cache=masks": 1 << 20}},
		"tensorlife.mask_cache.entries":   {"{entry}", "updown", map[string]int64{"cache=masks": 2}},
		"tensorlife.mask_cache.hits":      {"{lookup}", "counter", map[string]int64{"cache=masks": 7}},
		"tensorlife.mask_cache.misses":    {"{lookup}", "counter", map[string]int64{"cache=masks": 3}},
		"tensorlife.mask_cache.evictions": {"{entry}", "counter", map[string]int64{"cache=masks": 1}},
		"hw.gpu.memory.usage":             {"By", "updown", map[string]int64{"hw.id=host": 2*1024 + 2*256}},
		"hw.gpu.memory.limit":             {"By", "updown", map[string]int64{"hw.id=host": 64 << 10}},
		"tensorlife.watcher.suspects":     {"{site}", "updown", map[string]int64{"": 1}},
		"tensorlife.watcher.windows":      {"{window}", "counter", map[string]int64{"": 6}},
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
			assert.Equal(t, w.points, points)
		})
	}

	t.Run("freed tensors read zero, not absent", func(t *testing.T) {
		for _, x := range tensors {
			if !x.Freed() {
				require.NoError(t, x.Free())
			}
		}
		_, points := pointsOf(t, collect()["tensorlife.memory.live"])
		assert.Equal(t, map[string]int64{hostTensor: 0, hostMask: 6 * 512, cudaKV: 4096}, points)
	})

	t.Run("stop", func(t *testing.T) {
		require.NoError(t, m.Stop())
		assert.Empty(t, collect(), "no instrument reports after Stop")
		assert.ErrorIs(t, m.Stop(), track.ErrMetricsStopped)
	})
}

func TestMetricsOnlyForSourcesGiven(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	mp, collect := metricsReader(t)
	m, err := track.RegisterMetrics(tr, track.WithMeterProvider(mp))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Stop()) }()
	for name := range collect() {
		assert.Regexp(t, `^tensorlife\.(tensors|memory|allocations|frees|leaks|double_frees|ooms|mask\.|leak_suspects)`, name)
	}
}

func TestMetricsDefaultProvider(t *testing.T) {
	prev := otel.GetMeterProvider()
	defer otel.SetMeterProvider(prev)
	mp, collect := metricsReader(t)
	otel.SetMeterProvider(mp)

	tr, err := track.New()
	require.NoError(t, err)
	rec := &track.Record{Bytes: 100, Kind: "tensor", Device: "host"}
	require.NoError(t, tr.Record(context.Background(), rec, 0))
	m, err := track.RegisterMetrics(tr)
	require.NoError(t, err)
	_, points := pointsOf(t, collect()["tensorlife.memory.live"])
	assert.Equal(t, map[string]int64{"device=host,kind=tensor": 100}, points)
	require.NoError(t, m.Stop())
}

func TestMetricsRejectBadInput(t *testing.T) {
	tr, err := track.New(track.WithName("one"))
	require.NoError(t, err)
	other, err := track.New(track.WithName("other"))
	require.NoError(t, err)
	otherWatcher, err := track.NewWatcher(other)
	require.NoError(t, err)
	watcher, err := track.NewWatcher(tr)
	require.NoError(t, err)
	watcher2, err := track.NewWatcher(tr)
	require.NoError(t, err)

	tests := []struct {
		name string
		opts []track.MetricsOption
	}{
		{"nil provider", []track.MetricsOption{track.WithMeterProvider(nil)}},
		{"nil option", []track.MetricsOption{nil}},
		{"nil pool", []track.MetricsOption{track.WithPools(nil)}},
		{"typed nil pool", []track.MetricsOption{track.WithPools((*fakePool)(nil))}},
		{"nil cache", []track.MetricsOption{track.WithCaches(nil)}},
		{"nil device", []track.MetricsOption{track.WithDevices(nil)}},
		{"nil watcher", []track.MetricsOption{track.WithWatcher(nil)}},
		{"watcher of another tracker", []track.MetricsOption{track.WithWatcher(otherWatcher)}},
		{"two watchers", []track.MetricsOption{track.WithWatcher(watcher), track.WithWatcher(watcher2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := track.RegisterMetrics(tr, tt.opts...)
			assert.ErrorIs(t, err, track.ErrInvalidOption)
			assert.Nil(t, m)
		})
	}
	t.Run("nil tracker", func(t *testing.T) {
		_, err := track.RegisterMetrics(nil)
		assert.ErrorIs(t, err, track.ErrNilTracker)
	})
}

func ExampleRegisterMetrics() {
	tr, err := track.New()
	if err != nil {
		panic(err)
	}
	// A service would pass its exporter's provider, or none for the global.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := track.RegisterMetrics(tr, track.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	defer m.Stop()

	mask := &track.Record{Bytes: 4096, Kind: "mask", Device: "cuda:0", DType: "bool", Shape: []int{64, 64}}
	if err := tr.Record(context.Background(), mask, 0); err != nil {
		panic(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, metric := range rm.ScopeMetrics[0].Metrics {
		if metric.Name != "tensorlife.memory.live" {
			continue
		}
		for _, dp := range metric.Data.(metricdata.Sum[int64]).DataPoints {
			fmt.Println(metric.Name, dp.Attributes.Encoded(attribute.DefaultEncoder()), dp.Value, metric.Unit)
		}
	}
	// Output:
	// tensorlife.memory.live device=cuda:0,kind=mask 4096 By
}
