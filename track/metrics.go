package track

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Errors of RegisterMetrics, the watcher and the summary.
var (
	// ErrNilTracker means a nil *Tracker was passed.
	ErrNilTracker = errors.New("track: nil tracker")
	// ErrMetricsStopped means Metrics.Stop was called a second time.
	ErrMetricsStopped = errors.New("track: metrics already stopped")
)

// MetricsOption configures RegisterMetrics. Build one with WithMeterProvider
// or a source option (WithPools, WithCaches, WithDevices, WithWatcher).
type MetricsOption interface {
	applyMetrics(*metricsConfig) error
}

// SourceOption names figures to read besides the tracker's own: pools,
// caches, devices, a growth watcher. The same option serves RegisterMetrics
// and WriteSummary, so a service passes its sources to both alike.
type SourceOption interface {
	MetricsOption
	SummaryOption
}

// sources are what the metrics callback and the summary read besides the
// tracker. Each is read only when a scrape or a summary asks.
type sources struct {
	pools   []PoolSource
	caches  []CacheSource
	devices []DeviceSource
	watcher *Watcher
}

// check rejects a watcher of another tracker: its sites would be reported
// next to figures they are not part of.
func (s *sources) check(tr *Tracker) error {
	if s.watcher != nil && s.watcher.tr != tr {
		return fmt.Errorf("%w: WithWatcher: the watcher watches tracker %q, not %q",
			ErrInvalidOption, s.watcher.tr.Name(), tr.Name())
	}
	return nil
}

type sourceOption func(*sources) error

func (f sourceOption) applyMetrics(c *metricsConfig) error { return f(&c.sources) }
func (f sourceOption) applySummary(c *summaryConfig) error { return f(&c.sources) }

// isNil reports a nil interface or an interface holding a nil pointer, which
// would panic on the first scrape rather than at registration.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// WithPools reports the figures of caching allocators (a *pool.Pool):
// reserved, active and cached bytes, hits, misses, evictions and OOMs per
// device. Pools on one device are added together.
func WithPools(pools ...PoolSource) SourceOption {
	return sourceOption(func(s *sources) error {
		for i, p := range pools {
			if isNil(p) {
				return fmt.Errorf("%w: WithPools: pool %d is nil", ErrInvalidOption, i)
			}
		}
		s.pools = append(s.pools, pools...)
		return nil
	})
}

// WithCaches reports the figures of bounded caches (a *mask.Cache): bytes,
// entries, budget, hits, misses and evictions per cache name.
func WithCaches(caches ...CacheSource) SourceOption {
	return sourceOption(func(s *sources) error {
		for i, c := range caches {
			if isNil(c) {
				return fmt.Errorf("%w: WithCaches: cache %d is nil", ErrInvalidOption, i)
			}
		}
		s.caches = append(s.caches, caches...)
		return nil
	})
}

// WithDevices reports devices' memory use as the OpenTelemetry hardware
// conventions name it (hw.gpu.memory.usage and hw.gpu.memory.limit, keyed by
// hw.id, the device name). A device whose MemInfo fails is left out of that
// scrape rather than failing the others.
func WithDevices(devices ...DeviceSource) SourceOption {
	return sourceOption(func(s *sources) error {
		for i, d := range devices {
			if isNil(d) {
				return fmt.Errorf("%w: WithDevices: device %d is nil", ErrInvalidOption, i)
			}
		}
		s.devices = append(s.devices, devices...)
		return nil
	})
}

// WithWatcher reports a growth watcher's current leak suspects and the
// windows it has ended. The watcher must watch the same tracker.
func WithWatcher(w *Watcher) SourceOption {
	return sourceOption(func(s *sources) error {
		if w == nil {
			return fmt.Errorf("%w: WithWatcher(nil)", ErrInvalidOption)
		}
		if s.watcher != nil && s.watcher != w {
			return fmt.Errorf("%w: WithWatcher given twice", ErrInvalidOption)
		}
		s.watcher = w
		return nil
	})
}

type metricsConfig struct {
	provider metric.MeterProvider
	sources
}

type metricsOption func(*metricsConfig) error

func (f metricsOption) applyMetrics(c *metricsConfig) error { return f(c) }

// WithMeterProvider sets the provider the meter comes from (default
// otel.GetMeterProvider() at registration).
func WithMeterProvider(mp metric.MeterProvider) MetricsOption {
	return metricsOption(func(c *metricsConfig) error {
		if isNil(mp) {
			return fmt.Errorf("%w: WithMeterProvider(nil)", ErrInvalidOption)
		}
		c.provider = mp
		return nil
	})
}

// ScopeName is the instrumentation scope (meter) name of tensorlife's
// metrics: the import path of this package.
const ScopeName = "github.com/tensorlife/tensorlife/track"

// moduleVersion is tensorlife's module version as the binary was built with
// it, "devel" when built from a work tree.
var moduleVersion = sync.OnceValue(func() string {
	module := strings.TrimSuffix(modulePrefix, "/")
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	version := ""
	if bi.Main.Path == module {
		version = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == module {
			version = d.Version
			if d.Replace != nil {
				version = d.Replace.Version
			}
		}
	}
	if version == "" || version == "(devel)" {
		return "devel"
	}
	return version
})

// Metrics is a registration of a tracker's figures with an OpenTelemetry
// meter. Every instrument is observable and read in one callback when a
// reader collects, so recording and releasing allocations costs nothing
// extra. Stop unregisters the callback. Metrics is safe for concurrent use.
//
// Instruments (attributes in brackets; all low-cardinality):
//
//	tensorlife.tensors.live          {tensor}   live tensors [device, kind]
//	tensorlife.memory.live           By         live bytes [device, kind]
//	tensorlife.memory.peak           By         highest live bytes (gauge)
//	tensorlife.memory.allocated      By         bytes allocated since start
//	tensorlife.allocations           {allocation}
//	tensorlife.frees                 {free}
//	tensorlife.leaks.gc              {tensor}   tensors the GC found without Free
//	tensorlife.double_frees          {event}
//	tensorlife.ooms                  {event}    failed allocations
//	tensorlife.mask.rebuilds         {event}    masks built again instead of grown
//	tensorlife.leak_suspects         {site}     sites the growth watcher flagged
//
// With WithPools, per [device]: tensorlife.pool.memory.reserved, .active,
// .cached and .limit (By; limit only where one is set), and the counters
// tensorlife.pool.hits, .misses, .evictions, .ooms. With WithCaches, per
// [cache]: tensorlife.mask_cache.memory, .budget (By), .entries, and the
// counters tensorlife.mask_cache.hits, .misses, .evictions. With WithDevices,
// per [hw.id]: hw.gpu.memory.usage and hw.gpu.memory.limit (By). With
// WithWatcher: tensorlife.watcher.suspects (current) and
// tensorlife.watcher.windows.
//
// The live figures by device and kind come from one walk of the live set
// per collection, under each registry shard's lock in turn: O(live tensors)
// per scrape (tens of nanoseconds a tensor; BenchmarkCollect), nothing per
// allocation. Everything else reads counters.
type Metrics struct {
	tr      *Tracker
	src     sources
	reg     metric.Registration
	stopped atomic.Bool
	inst    instruments

	// mu serializes callbacks (two readers may collect at once) and guards
	// the reused walk buffer and attribute caches.
	mu      sync.Mutex
	classes map[classKey]*classLive
	attrs   map[attrKey]metric.ObserveOption
}

// RegisterMetrics registers tr's instruments with a meter named ScopeName
// from the configured provider. Options are validated first; an invalid
// one returns an error matching ErrInvalidOption and registers nothing.
func RegisterMetrics(tr *Tracker, opts ...MetricsOption) (*Metrics, error) {
	if tr == nil {
		return nil, ErrNilTracker
	}
	var cfg metricsConfig
	for _, o := range opts {
		if isNil(o) {
			return nil, fmt.Errorf("%w: nil metrics option", ErrInvalidOption)
		}
		if err := o.applyMetrics(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.check(tr); err != nil {
		return nil, err
	}
	if cfg.provider == nil {
		cfg.provider = otel.GetMeterProvider()
	}
	meter := cfg.provider.Meter(ScopeName, metric.WithInstrumentationVersion(moduleVersion()))
	m := &Metrics{tr: tr, src: cfg.sources,
		classes: make(map[classKey]*classLive), attrs: make(map[attrKey]metric.ObserveOption)}
	obs, err := m.inst.create(meter, &cfg.sources)
	if err != nil {
		return nil, fmt.Errorf("track: creating instruments: %w", err)
	}
	m.reg, err = meter.RegisterCallback(m.observe, obs...)
	if err != nil {
		return nil, fmt.Errorf("track: registering metrics callback: %w", err)
	}
	return m, nil
}

// Stop unregisters the metrics callback: later collections report none of
// the tracker's instruments. A second call returns ErrMetricsStopped.
func (m *Metrics) Stop() error {
	if !m.stopped.CompareAndSwap(false, true) {
		return ErrMetricsStopped
	}
	return m.reg.Unregister()
}

// observe is the one callback. It reads counters and sources, walks the live
// set once for the device and kind breakdown, and never fails a collection
// for one source: a device that cannot report is left out.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := &m.inst
	tt := m.tr.Totals()
	m.tr.liveByClass(m.classes)
	for k, c := range m.classes {
		attrs := m.attr(attrKey{a: "device", av: k.device, b: "kind", bv: k.kind})
		o.ObserveInt64(in.liveTensors, c.count, attrs)
		o.ObserveInt64(in.liveBytes, c.bytes, attrs)
	}
	o.ObserveInt64(in.peakBytes, tt.PeakBytes)
	o.ObserveInt64(in.allocBytes, tt.AllocBytes)
	o.ObserveInt64(in.allocs, tt.Allocs)
	o.ObserveInt64(in.frees, tt.Frees)
	o.ObserveInt64(in.gcLeaks, tt.GCLeaks)
	o.ObserveInt64(in.doubleFrees, tt.Event(EventDoubleFree))
	o.ObserveInt64(in.ooms, tt.Event(EventOOM))
	o.ObserveInt64(in.maskRebuilds, tt.Event(EventMaskRebuilt))
	o.ObserveInt64(in.leakSuspects, tt.Event(EventLeakSuspect))

	if len(m.src.pools) > 0 {
		for dev, p := range sumPools(m.src.pools) {
			attrs := m.attr(attrKey{a: "device", av: dev})
			o.ObserveInt64(in.poolReserved, p.Reserved, attrs)
			o.ObserveInt64(in.poolActive, p.Active, attrs)
			o.ObserveInt64(in.poolCached, p.Cached, attrs)
			if p.Limit > 0 {
				o.ObserveInt64(in.poolLimit, p.Limit, attrs)
			}
			o.ObserveInt64(in.poolHits, p.Hits, attrs)
			o.ObserveInt64(in.poolMisses, p.Misses, attrs)
			o.ObserveInt64(in.poolEvictions, p.Evictions, attrs)
			o.ObserveInt64(in.poolOOMs, p.OOMs, attrs)
		}
	}
	if len(m.src.caches) > 0 {
		for name, c := range sumCaches(m.src.caches) {
			attrs := m.attr(attrKey{a: "cache", av: name})
			o.ObserveInt64(in.cacheBytes, c.Bytes, attrs)
			o.ObserveInt64(in.cacheBudget, c.BudgetBytes, attrs)
			o.ObserveInt64(in.cacheEntries, c.Entries, attrs)
			o.ObserveInt64(in.cacheHits, c.Hits, attrs)
			o.ObserveInt64(in.cacheMisses, c.Misses, attrs)
			o.ObserveInt64(in.cacheEvictions, c.Evictions, attrs)
		}
	}
	for _, d := range m.src.devices {
		free, total, err := d.MemInfo()
		if err != nil || total <= 0 {
			continue
		}
		attrs := m.attr(attrKey{a: "hw.id", av: d.Name()})
		o.ObserveInt64(in.gpuUsage, total-free, attrs)
		o.ObserveInt64(in.gpuLimit, total, attrs)
	}
	if w := m.src.watcher; w != nil {
		o.ObserveInt64(in.watcherSuspects, w.suspectCount.Load())
		o.ObserveInt64(in.watcherWindows, int64(w.windows.Load()))
	}
	return nil
}

// attrKey names an attribute set of one or two string attributes.
type attrKey struct{ a, av, b, bv string }

// attr returns the cached observe option for k, so a steady scrape builds
// no attribute sets. Called with m.mu held.
func (m *Metrics) attr(k attrKey) metric.ObserveOption {
	if opt, ok := m.attrs[k]; ok {
		return opt
	}
	kv := []attribute.KeyValue{attribute.String(k.a, k.av)}
	if k.b != "" {
		kv = append(kv, attribute.String(k.b, k.bv))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	m.attrs[k] = opt
	return opt
}

// sumPools adds up pools that share a device, so each device is observed
// once per instrument.
func sumPools(pools []PoolSource) map[string]PoolStats {
	out := make(map[string]PoolStats, len(pools))
	for _, p := range pools {
		s := p.PoolStats()
		t := out[s.Device]
		t.Device = s.Device
		t.Reserved += s.Reserved
		t.Active += s.Active
		t.Cached += s.Cached
		t.PeakReserved += s.PeakReserved
		t.PeakActive += s.PeakActive
		t.Limit += s.Limit
		t.DeviceAllocs += s.DeviceAllocs
		t.DeviceFrees += s.DeviceFrees
		t.Hits += s.Hits
		t.Misses += s.Misses
		t.Evictions += s.Evictions
		t.OOMs += s.OOMs
		out[s.Device] = t
	}
	return out
}

// sumCaches adds up caches that share a name.
func sumCaches(caches []CacheSource) map[string]CacheStats {
	out := make(map[string]CacheStats, len(caches))
	for _, c := range caches {
		s := c.CacheStats()
		t := out[s.Name]
		t.Name = s.Name
		t.Bytes += s.Bytes
		t.Entries += s.Entries
		t.BudgetBytes += s.BudgetBytes
		t.MaxEntries += s.MaxEntries
		t.Hits += s.Hits
		t.Misses += s.Misses
		t.Evictions += s.Evictions
		out[s.Name] = t
	}
	return out
}

// classKey is a device and kind: the breakdown of the live figures.
type classKey struct{ device, kind string }

type classLive struct{ count, bytes int64 }

// liveByClass adds up the live set by device and kind into dst, reusing its
// entries. Classes seen before and now empty stay at zero, so an instrument
// reports 0 rather than dropping the series. It walks every record, one
// shard lock at a time, allocating only for a class not seen before.
func (t *Tracker) liveByClass(dst map[classKey]*classLive) {
	for _, c := range dst {
		*c = classLive{}
	}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		var last *classLive
		var lastKey classKey
		for r := sh.head; r != nil; r = r.next {
			k := classKey{device: r.Device, kind: r.Kind}
			if last == nil || k != lastKey {
				last = dst[k]
				if last == nil {
					last = &classLive{}
					dst[k] = last
				}
				lastKey = k
			}
			last.count++
			last.bytes += r.Bytes
		}
		sh.mu.Unlock()
	}
}

// instruments are the observable instruments one registration owns.
type instruments struct {
	liveTensors, liveBytes, peakBytes, allocBytes           metric.Int64Observable
	allocs, frees, gcLeaks, doubleFrees, ooms, maskRebuilds metric.Int64Observable
	leakSuspects                                            metric.Int64Observable
	poolReserved, poolActive, poolCached, poolLimit         metric.Int64Observable
	poolHits, poolMisses, poolEvictions, poolOOMs           metric.Int64Observable
	cacheBytes, cacheBudget, cacheEntries                   metric.Int64Observable
	cacheHits, cacheMisses, cacheEvictions                  metric.Int64Observable
	gpuUsage, gpuLimit                                      metric.Int64Observable
	watcherSuspects, watcherWindows                         metric.Int64Observable
}

// instrumentSpec describes one instrument: where it goes, what it is.
type instrumentSpec struct {
	dst  *metric.Int64Observable
	kind int // instGauge, instUpDown or instCounter
	name string
	unit string
	desc string
}

const (
	instGauge = iota
	instUpDown
	instCounter
)

// create makes the instruments for the tracker and for the sources given,
// and returns them for the callback registration.
func (in *instruments) create(meter metric.Meter, src *sources) ([]metric.Observable, error) {
	specs := []instrumentSpec{
		{&in.liveTensors, instUpDown, "tensorlife.tensors.live", "{tensor}", "Live tensors, recorded and not freed."},
		{&in.liveBytes, instUpDown, "tensorlife.memory.live", "By", "Device bytes held by live tensors."},
		{&in.peakBytes, instGauge, "tensorlife.memory.peak", "By", "Highest live bytes since the tracker started."},
		{&in.allocBytes, instCounter, "tensorlife.memory.allocated", "By", "Bytes allocated since the tracker started."},
		{&in.allocs, instCounter, "tensorlife.allocations", "{allocation}", "Tensors allocated."},
		{&in.frees, instCounter, "tensorlife.frees", "{free}", "Tensors freed."},
		{&in.gcLeaks, instCounter, "tensorlife.leaks.gc", "{tensor}", "Tensors the garbage collector found without Free."},
		{&in.doubleFrees, instCounter, "tensorlife.double_frees", "{event}", "Tensors freed twice."},
		{&in.ooms, instCounter, "tensorlife.ooms", "{event}", "Allocations that failed for lack of memory."},
		{&in.maskRebuilds, instCounter, "tensorlife.mask.rebuilds", "{event}", "Masks built again where they should have grown."},
		{&in.leakSuspects, instCounter, "tensorlife.leak_suspects", "{site}", "Call sites the growth watcher flagged as leak suspects."},
	}
	if len(src.pools) > 0 {
		specs = append(specs,
			instrumentSpec{&in.poolReserved, instUpDown, "tensorlife.pool.memory.reserved", "By", "Bytes a pool holds from its device."},
			instrumentSpec{&in.poolActive, instUpDown, "tensorlife.pool.memory.active", "By", "Bytes in blocks a pool handed out."},
			instrumentSpec{&in.poolCached, instUpDown, "tensorlife.pool.memory.cached", "By", "Bytes in free blocks a pool keeps for reuse."},
			instrumentSpec{&in.poolLimit, instUpDown, "tensorlife.pool.memory.limit", "By", "A pool's memory budget."},
			instrumentSpec{&in.poolHits, instCounter, "tensorlife.pool.hits", "{allocation}", "Allocations served from a pool's cache."},
			instrumentSpec{&in.poolMisses, instCounter, "tensorlife.pool.misses", "{allocation}", "Allocations a pool sent to its device."},
			instrumentSpec{&in.poolEvictions, instCounter, "tensorlife.pool.evictions", "{block}", "Cached blocks a pool returned to its device."},
			instrumentSpec{&in.poolOOMs, instCounter, "tensorlife.pool.ooms", "{event}", "Allocations a pool refused for lack of memory."},
		)
	}
	if len(src.caches) > 0 {
		specs = append(specs,
			instrumentSpec{&in.cacheBytes, instUpDown, "tensorlife.mask_cache.memory", "By", "Bytes a mask cache holds."},
			instrumentSpec{&in.cacheBudget, instUpDown, "tensorlife.mask_cache.budget", "By", "A mask cache's byte budget."},
			instrumentSpec{&in.cacheEntries, instUpDown, "tensorlife.mask_cache.entries", "{entry}", "Entries a mask cache holds."},
			instrumentSpec{&in.cacheHits, instCounter, "tensorlife.mask_cache.hits", "{lookup}", "Mask cache lookups that found a mask."},
			instrumentSpec{&in.cacheMisses, instCounter, "tensorlife.mask_cache.misses", "{lookup}", "Mask cache lookups that found none."},
			instrumentSpec{&in.cacheEvictions, instCounter, "tensorlife.mask_cache.evictions", "{entry}", "Masks a cache evicted."},
		)
	}
	if len(src.devices) > 0 {
		specs = append(specs,
			instrumentSpec{&in.gpuUsage, instUpDown, "hw.gpu.memory.usage", "By", "GPU memory used."},
			instrumentSpec{&in.gpuLimit, instUpDown, "hw.gpu.memory.limit", "By", "Size of the GPU memory."},
		)
	}
	if src.watcher != nil {
		specs = append(specs,
			instrumentSpec{&in.watcherSuspects, instUpDown, "tensorlife.watcher.suspects", "{site}", "Current leak suspects."},
			instrumentSpec{&in.watcherWindows, instCounter, "tensorlife.watcher.windows", "{window}", "Windows the growth watcher ended."},
		)
	}
	out := make([]metric.Observable, 0, len(specs))
	for _, s := range specs {
		var err error
		switch s.kind {
		case instGauge:
			*s.dst, err = meter.Int64ObservableGauge(s.name, metric.WithUnit(s.unit), metric.WithDescription(s.desc))
		case instUpDown:
			*s.dst, err = meter.Int64ObservableUpDownCounter(s.name, metric.WithUnit(s.unit), metric.WithDescription(s.desc))
		default:
			*s.dst, err = meter.Int64ObservableCounter(s.name, metric.WithUnit(s.unit), metric.WithDescription(s.desc))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		out = append(out, *s.dst)
	}
	return out, nil
}
