// Package oteltrack publishes a tensorlife tracker's figures as OpenTelemetry
// metrics: live tensors and their memory by device and kind, allocations,
// frees, leaks, misuse and out-of-memory errors, and the memory of the
// pools, mask caches and devices and the growth watchers' suspects made
// with the tracker, which attached themselves to it (report.Sources adds
// those made without it).
//
// It is the only tensorlife package that imports OpenTelemetry, so a program
// that tracks tensors without exporting metrics does not link it. It is
// named, like the OpenTelemetry contrib packages, after what it instruments.
//
//	m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(provider))
//	defer m.Stop()
//
// Every instrument is observable and read in one callback when a reader
// collects, and that callback reads counters only (Tracker.Totals,
// Books.LiveByClass, the parts' Stats): a collection costs
// O(devices × kinds + pools + caches), never a walk of the live set, and
// recording or releasing a tensor costs nothing extra.
//
// # Instruments
//
// Names, units and attributes follow the OpenTelemetry semantic conventions:
// memory is a *.usage UpDownCounter split by a state attribute with a
// *.limit beside it, names are singular, attributes are namespaced, and all
// are low-cardinality (never tensor ids, labels or stacks): a tracker
// counts at most 64 device × kind classes, the rest under the kind
// "tensorlife.other", and a class with nothing live is not observed, so its
// series goes. Counts of things
// in existence are UpDownCounters named for the state they count
// (tensorlife.tensor.live), not *.count: Prometheus reserves _count for
// histograms and summaries, and promtool rejects it elsewhere.
//
//	tensorlife.tensor.live            {tensor}      UpDownCounter  live tensors [tensorlife.device, tensorlife.tensor.kind]
//	tensorlife.tensor.memory.usage     By            UpDownCounter  bytes of live tensors [tensorlife.device, tensorlife.tensor.kind]
//	tensorlife.tensor.memory.peak      By            Gauge          highest live bytes since the tracker started
//	tensorlife.tensor.memory.outlived  By            UpDownCounter  live bytes that outlived their request: what the watcher judges
//	tensorlife.tensor.memory.allocated By            Counter        bytes allocated since start
//	tensorlife.tensor.allocations      {allocation}  Counter
//	tensorlife.tensor.frees            {free}        Counter
//	tensorlife.tensor.leaks            {tensor}      Counter        tensors the garbage collector found without Free
//	tensorlife.tensor.leak_reports_lost {report}   Counter        leak reports a callback 4096 behind was not given
//	tensorlife.tensor.double_frees     {free}        Counter
//	tensorlife.tensor.oom_errors       {error}       Counter        allocations refused for lack of memory
//	tensorlife.mask.rebuilds           {mask}        Counter        masks built again where they should have grown
//	tensorlife.stack.fallbacks         {capture}     Counter        captures the frame-pointer walk could not serve
//	tensorlife.stack.uncached          {capture}     Counter        captures past a full walk cache, by runtime.Callers
//	tensorlife.tensor.free_lines_lost  {free}        Counter        frees whose line the full free-line table lost
//	tensorlife.part.panics             {call}        Counter        calls into code tensorlife does not own that panicked, recovered
//
// Of the requests (track.WithRequest, httptrack): the open ones, facts
// never judged, and, with track.RequestKinds, the peaks of the ended ones
// per tensorlife.request.kind and tensorlife.device (at most 32 kinds and
// "other" on each device, so at most 33 series per device and gauge):
//
//	tensorlife.request.open                     {request}  UpDownCounter  open requests that recorded a tensor
//	tensorlife.request.memory.in_flight         By         UpDownCounter  what the open requests hold in flight
//	tensorlife.request.oldest.age               s          Gauge          how long the oldest has been open
//	tensorlife.request.largest.memory.in_flight By         Gauge          the in-flight bytes of the largest
//	tensorlife.request.memory.peak              By         Histogram      each ended request's peak in flight
//	tensorlife.request.memory.peak.p50, .p99    By         Gauge          the peaks' median and 99th percentile
//	tensorlife.request.memory.peak.max          By         Gauge          the largest peak, exact
//
// The gauges are the memory summary's "Request kinds" figures, read from
// the tracker's histograms of 8 buckets an octave: a percentile is the
// largest peak seen in the bucket that holds it, within 1/8 of an octave
// (9%) of the true one. The histogram's buckets are an octave each, from
// 1 KiB to 1 TiB (under 1 KiB in the first, 1 TiB and over in +Inf), so
// histogram_quantile over it is within an octave: read a kind's p99 from
// the gauge (tensorlife_request_memory_peak_p99_bytes), and the histogram
// for rates and heatmaps.
//
// With pools, per tensorlife.device (pools on one device add up):
//
//	tensorlife.pool.memory.usage       By            UpDownCounter  [tensorlife.pool.memory.state = active | cached]
//	tensorlife.pool.memory.limit       By            UpDownCounter  the budget, where one is set
//	tensorlife.pool.hits, .misses      {allocation}  Counter
//	tensorlife.pool.evictions          {block}       Counter
//	tensorlife.pool.oom_errors         {error}       Counter
//
// Reserved memory, PyTorch's name for what the allocator holds from the
// device, is the sum over both states.
//
// With pools that admit requests (pool.Pool.Admit), per tensorlife.device
// and, for the counts, tensorlife.request.kind (at most 32 kinds a device,
// the rest under "other", as the tracker bounds them; a kind is cut to
// pool.MaxKindBytes):
//
//	tensorlife.pool.admissions                  {request}  Counter        [tensorlife.admission.result = admitted | refused]
//	tensorlife.pool.admission.ran_out           {request}  Counter        admitted requests that ran out of memory inside their admission
//	tensorlife.pool.admission.past_reservation  {request}  Counter        admitted requests that held more than their reservation
//	tensorlife.pool.admission.open              {request}  UpDownCounter  admissions open now
//	tensorlife.pool.admission.reserved          By         UpDownCounter  bytes the open admissions reserved, drawn or not
//	tensorlife.pool.admission.promised          By         UpDownCounter  of those, not drawn yet: counted against the budget
//
// Both results of a kind are observed once it was asked for, so a ratio of
// refused to all is defined from its first request. A reservation released
// by Admission.End or by its request's end function (httptrack's) is gone
// from the next collection; one released by its context's end alone, once
// that context's AfterFunc has run.
//
// With mask caches, per tensorlife.cache.name:
//
//	tensorlife.mask.cache.memory.usage By            UpDownCounter
//	tensorlife.mask.cache.memory.limit By            UpDownCounter  the byte budget
//	tensorlife.mask.cache.entry.live  {entry}       UpDownCounter
//	tensorlife.mask.cache.hits, .misses {lookup}     Counter
//	tensorlife.mask.cache.evictions    {entry}       Counter
//
// With owners tensors were handed to (track.Owner; a mask cache is one),
// one series per owner, by tensorlife.owner.name and tensorlife.owner.id
// (two owners of one name are two series), what each holds; an owner over
// its limit is counted in tensorlife.watcher.suspect.active:
//
//	tensorlife.owner.memory.usage  By        UpDownCounter
//	tensorlife.owner.memory.limit  By        UpDownCounter  its MaxBytes, when it has one
//	tensorlife.owner.tensor.live   {tensor}  UpDownCounter
//
// With devices (those of the tracker's pools and allocators, and
// Sources.Devices), per tensorlife.device, as the device reports it:
//
//	tensorlife.device.memory.usage     By            UpDownCounter  [tensorlife.device.memory.state = tensorlife | outside | free]
//	tensorlife.device.memory.limit     By            UpDownCounter  the device's total memory
//
// The states add up to the limit. tensorlife is what tensorlife's
// allocators hold on the device (the pools and direct allocators attached
// to the tracker, see track.Attach, and Sources.Pools); outside is the rest
// of the device's used memory: memory tensorlife does not account for (a
// cgo runtime's buffers, a library's workspace, another process on a GPU).
// It is report.Reading.Devices, the figures of the summary's Devices
// section.
//
// A device that identifies its hardware (a method UUID() string returning a
// non-empty id, as a CUDA device does) is also reported under the hardware
// conventions, hw.gpu.memory.usage and hw.gpu.memory.limit with hw.id set
// to that id and hw.type "gpu". These describe the whole GPU: every process
// on it reports the same values under the same hw.id, so aggregate them with
// max, not sum. The host device is no GPU and is never reported as one.
//
// With growth watchers (several add up):
//
//	tensorlife.watcher.suspect.active   {site}        UpDownCounter  current leak suspects
//	tensorlife.watcher.flags           {site}        Counter        times a site became a suspect
//	tensorlife.watcher.windows         {window}      Counter        windows the watcher ended
//	tensorlife.watcher.suspect.runs_out_in  s        Gauge          shortest forecast of the suspects on a device
//
// tensorlife.watcher.suspect.runs_out_in is the shortest Suspect.RunsOutIn
// of the current suspects on each device, in whole seconds (at least 1),
// with tensorlife.device and tensorlife.forecast.memory ("pool budget" or
// "device memory": what runs out), and 0 on a device where a suspect's
// memory has run out (watch.Suspect.RanOut: the suspect stays one, and so
// does this point, until its bytes are freed or handed to an owner). A
// device without a suspect with a forecast has no point, so an alert on it
// clears when the suspect does.
package oteltrack

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	sat "github.com/tensorlife/tensorlife/internal/counter" // the package name is one of the instrument kinds here
	"github.com/tensorlife/tensorlife/internal/option"
	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/track"
)

// Errors returned by this package.
var (
	// ErrInvalidOption means an option's value cannot be used.
	ErrInvalidOption = errors.New("oteltrack: invalid option")
	// ErrStopped means Metrics.Stop was called a second time.
	ErrStopped = errors.New("oteltrack: metrics already stopped")
)

// ScopeName is the instrumentation scope (meter) name: this package's
// import path.
const ScopeName = "github.com/tensorlife/tensorlife/oteltrack"

// Option configures Register. Options are validated there: an invalid value
// is an error matching ErrInvalidOption that names the option.
type Option interface {
	apply(*config) error
}

type config struct {
	provider metric.MeterProvider
	sources  report.Sources
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithMeterProvider sets the provider the meter comes from (default
// otel.GetMeterProvider() at registration).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(option.NotNil("WithMeterProvider", mp, func(c *config, mp metric.MeterProvider) { c.provider = mp }))
}

// WithSources adds the figures of pools, caches and devices made without the
// tracker (see the package doc for the instruments each brings); those made
// with it are found on it. The same Sources value serves
// report.WriteSummary.
func WithSources(src report.Sources) Option {
	return optionFunc(option.Set(src, func(c *config, src report.Sources) { c.sources = src }))
}

// moduleVersion is tensorlife's module version as the binary was built with
// it, "devel" when built from a work tree.
var moduleVersion = sync.OnceValue(func() string {
	const module = "github.com/tensorlife/tensorlife"
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
// meter. Stop unregisters it. Metrics is safe for concurrent use.
type Metrics struct {
	tr      *track.Tracker
	src     report.Sources
	reg     metric.Registration
	stopped atomic.Bool
	inst    instruments
	adm     admissionInstruments

	// mu serializes callbacks (two readers may collect at once) and guards
	// the attribute cache.
	mu    sync.Mutex
	attrs map[attrKey]metric.ObserveOption
	// peaksSeen is, per request kind and device, each histogram bucket's
	// count (by its low bound) already recorded into requestPeaks:
	// bounded by the tracker's kinds and buckets.
	peaksSeen map[attrKey]map[int64]int64
}

// Register registers tr's instruments with a meter named ScopeName from the
// configured provider. Options are validated first; an invalid one returns
// an error matching ErrInvalidOption and registers nothing.
func Register(tr *track.Tracker, opts ...Option) (*Metrics, error) {
	if tr == nil {
		return nil, track.ErrNilTracker
	}
	var cfg config
	if err := option.Apply(&cfg, opts, Option.apply, ErrInvalidOption); err != nil {
		return nil, err
	}
	if err := cfg.sources.Validate(); err != nil {
		return nil, fmt.Errorf("%w: WithSources: %w", ErrInvalidOption, err)
	}
	if cfg.provider == nil {
		cfg.provider = otel.GetMeterProvider()
	}
	meter := cfg.provider.Meter(ScopeName, metric.WithInstrumentationVersion(moduleVersion()))
	m := &Metrics{tr: tr, src: cfg.sources, attrs: make(map[attrKey]metric.ObserveOption)}
	obs, err := m.inst.create(meter)
	if err != nil {
		return nil, fmt.Errorf("oteltrack: creating instruments: %w", err)
	}
	admObs, err := m.adm.create(meter)
	if err != nil {
		return nil, fmt.Errorf("oteltrack: creating instruments: %w", err)
	}
	obs = append(obs, admObs...)
	m.reg, err = meter.RegisterCallback(m.observe, obs...)
	if err != nil {
		return nil, fmt.Errorf("oteltrack: registering the metrics callback: %w", err)
	}
	return m, nil
}

// Stop unregisters the metrics callback: later collections report none of
// the tracker's instruments. A second call returns ErrStopped.
func (m *Metrics) Stop() error {
	if !m.stopped.CompareAndSwap(false, true) {
		return ErrStopped
	}
	return m.reg.Unregister()
}

// Attribute keys.
const (
	attrDevice      = "tensorlife.device"
	attrForecastOf  = "tensorlife.forecast.memory"
	attrKind        = "tensorlife.tensor.kind"
	attrRequestKind = "tensorlife.request.kind"
	attrPoolState   = "tensorlife.pool.memory.state"
	attrCache       = "tensorlife.cache.name"
	attrOwner       = "tensorlife.owner.name"
	attrOwnerID     = "tensorlife.owner.id"
	attrDeviceState = "tensorlife.device.memory.state"
)

// observe is the one callback. It reads counters and sources only, and never
// fails a collection for one source: a device that cannot report is left
// out of that collection.
func (m *Metrics) observe(ctx context.Context, o metric.Observer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := &m.inst
	tt := m.tr.Totals()
	for _, c := range m.tr.Books().LiveByClass() {
		attrs := m.attr(attrKey{attrDevice, c.Device, attrKind, c.Kind})
		o.ObserveInt64(in.tensorCount, c.LiveCount, attrs)
		o.ObserveInt64(in.tensorMemory, c.LiveBytes, attrs)
	}
	o.ObserveInt64(in.peak, tt.PeakBytes)
	open := m.tr.OpenRequests(1) // one scan of the open list, no walk of the live set
	o.ObserveInt64(in.requestsOpen, int64(open.Count))
	o.ObserveInt64(in.requestsInFlight, open.InFlightBytes)
	o.ObserveInt64(in.requestOldestAge, int64(open.OldestAge/time.Second))
	var largest int64
	if len(open.Largest) > 0 {
		largest = open.Largest[0].InFlightBytes
	}
	o.ObserveInt64(in.requestLargest, largest)
	m.recordPeaks(ctx, o, m.tr.RequestCosts())
	o.ObserveInt64(in.outlived, tt.OutlivedBytes)
	o.ObserveInt64(in.allocated, tt.AllocBytes)
	o.ObserveInt64(in.allocs, tt.Allocs)
	o.ObserveInt64(in.frees, tt.Frees)
	o.ObserveInt64(in.leaks, tt.GCLeaks)
	o.ObserveInt64(in.leakReportsLost, tt.LeakReportsLost)
	o.ObserveInt64(in.doubleFrees, tt.Event(track.EventDoubleFree))
	o.ObserveInt64(in.ooms, tt.Event(track.EventOOM))
	o.ObserveInt64(in.maskRebuilds, tt.Event(track.EventMaskRebuilt))
	o.ObserveInt64(in.stackFallbacks, tt.StackFallbacks+tt.StackMismatches)
	o.ObserveInt64(in.stackUncached, tt.StackUncached)
	o.ObserveInt64(in.freeLinesLost, tt.FreeLinesLost)

	reading := m.src.Read(m.tr) // each pool read once, for its figures and its device's
	if len(reading.Pools) > 0 {
		for dev, p := range sumPools(reading.Pools) {
			o.ObserveInt64(in.poolUsage, p.Active, m.attr(attrKey{attrDevice, dev, attrPoolState, "active"}))
			o.ObserveInt64(in.poolUsage, p.Cached, m.attr(attrKey{attrDevice, dev, attrPoolState, "cached"}))
			attrs := m.attr(attrKey{a: attrDevice, av: dev})
			if p.Limit > 0 {
				o.ObserveInt64(in.poolLimit, p.Limit, attrs)
			}
			o.ObserveInt64(in.poolHits, p.Hits, attrs)
			o.ObserveInt64(in.poolMisses, p.Misses, attrs)
			o.ObserveInt64(in.poolEvictions, p.Evictions, attrs)
			o.ObserveInt64(in.poolOOMs, p.OOMs, attrs)
		}
		m.adm.observe(o, reading.Pools)
	}
	if len(reading.Caches) > 0 {
		for name, c := range sumCaches(reading.Caches) {
			attrs := m.attr(attrKey{a: attrCache, av: name})
			o.ObserveInt64(in.cacheUsage, c.Bytes, attrs)
			o.ObserveInt64(in.cacheLimit, c.MaxBytes, attrs)
			o.ObserveInt64(in.cacheEntries, c.Entries, attrs)
			o.ObserveInt64(in.cacheHits, c.Hits, attrs)
			o.ObserveInt64(in.cacheMisses, c.Misses, attrs)
			o.ObserveInt64(in.cacheEvictions, c.Evictions, attrs)
		}
	}
	for _, ow := range m.tr.Owners() { // O(owners): counters kept as tensors are handed over and back
		attrs := m.attr(attrKey{attrOwner, ow.Name, attrOwnerID, strconv.FormatUint(ow.ID, 10)})
		o.ObserveInt64(in.ownerUsage, ow.Bytes, attrs)
		o.ObserveInt64(in.ownerTensors, ow.Count, attrs)
		if ow.MaxBytes > 0 {
			o.ObserveInt64(in.ownerLimit, ow.MaxBytes, attrs)
		}
	}
	for _, d := range reading.Devices {
		if d.Err != nil || d.Total <= 0 {
			continue
		}
		// The three states add up to the device's total memory.
		o.ObserveInt64(in.deviceUsage, d.Used-d.Outside, m.attr(attrKey{attrDevice, d.Device, attrDeviceState, "tensorlife"}))
		o.ObserveInt64(in.deviceUsage, d.Outside, m.attr(attrKey{attrDevice, d.Device, attrDeviceState, "outside"}))
		o.ObserveInt64(in.deviceUsage, d.Free, m.attr(attrKey{attrDevice, d.Device, attrDeviceState, "free"}))
		o.ObserveInt64(in.deviceLimit, d.Total, m.attr(attrKey{a: attrDevice, av: d.Device}))
		if id := d.HardwareID; id != "" {
			attrs := m.attr(attrKey{"hw.id", id, "hw.type", "gpu"})
			o.ObserveInt64(in.gpuUsage, d.Used, attrs)
			o.ObserveInt64(in.gpuLimit, d.Total, attrs)
		}
	}
	if len(reading.Watchers) > 0 {
		// Suspects of several watchers add up; the flags are the tracker's.
		// Each watcher is a part, read through the tracker's seam with the
		// others (report.Sources.Read): one that panicked is not here.
		var suspects, windows int64
		shortest := map[forecastKey]int64{}
		for _, w := range reading.Watchers {
			suspects = sat.AddSat(suspects, int64(len(w.Suspects)))
			windows = sat.AddSat(windows, int64(min(w.WindowsEnded, math.MaxInt64)))
			for _, sus := range w.Suspects {
				if sus.RanOut != "" { // it has run out: 0 left, the shortest there is
					shortest[forecastKey{sus.Device, sus.HeadroomOf}] = 0
					continue
				}
				shorter(shortest, forecastKey{sus.Device, sus.HeadroomOf}, sus.RunsOutIn)
			}
		}
		o.ObserveInt64(in.suspects, suspects)
		o.ObserveInt64(in.flags, tt.Event(track.EventLeakSuspect))
		o.ObserveInt64(in.windows, windows)
		for k, secs := range shortest {
			o.ObserveInt64(in.runsOutIn, secs, m.attr(attrKey{attrDevice, k.device, attrForecastOf, k.of}))
		}
	}
	// Read last, so that a panic of this collection's parts is counted in it.
	o.ObserveInt64(in.partPanics, m.tr.Totals().PartPanics)
	return nil
}

// recordPeaks observes the request peak gauges of each kind and device,
// and records into the request peak histogram the requests that ended
// since the last collection: each bucket's new count, at the largest
// value the bucket saw, which falls in the instrument's bucket that holds
// the whole of the tracker's. O(requests ended since), as if each end were
// recorded. Called with m.mu held.
func (m *Metrics) recordPeaks(ctx context.Context, o metric.Observer, costs []track.RequestKindStats) {
	for _, k := range costs {
		key := attrKey{attrRequestKind, k.Kind, attrDevice, k.Device}
		// The summary's figures, one series per kind and device.
		attrs := m.attr(key)
		o.ObserveInt64(m.inst.requestPeakP50, k.PeakP50, attrs)
		o.ObserveInt64(m.inst.requestPeakP99, k.PeakP99, attrs)
		o.ObserveInt64(m.inst.requestPeakMax, k.PeakMax, attrs)
		seen := m.peaksSeen[key]
		if seen == nil {
			if m.peaksSeen == nil {
				m.peaksSeen = make(map[attrKey]map[int64]int64)
			}
			seen = make(map[int64]int64)
			m.peaksSeen[key] = seen
		}
		var opt metric.RecordOption
		for _, b := range k.Peaks {
			n := b.Count - seen[b.Low]
			if n <= 0 {
				continue
			}
			if opt == nil {
				opt = metric.WithAttributeSet(attribute.NewSet(attribute.String(attrRequestKind, k.Kind),
					attribute.String(attrDevice, k.Device)))
			}
			for range n {
				m.inst.requestPeaks.Record(ctx, b.Max, opt)
			}
			seen[b.Low] = b.Count
		}
	}
}

// attrKey names an attribute set of one or two string attributes.
type attrKey struct{ a, av, b, bv string }

// maxCachedAttrs bounds the attribute sets attr keeps between collections.
const maxCachedAttrs = 4096

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
	if len(m.attrs) >= maxCachedAttrs {
		clear(m.attrs) // owners come and go: the cache stays bounded
	}
	m.attrs[k] = opt
	return opt
}

// sumPools adds up pools that share a device, so each device is observed
// once per instrument.
func sumPools(pools []pool.Stats) map[string]pool.Stats {
	out := make(map[string]pool.Stats, len(pools))
	for _, s := range pools {
		t := out[s.Device]
		t.Device = s.Device
		t.Active += s.Active
		t.Cached += s.Cached
		t.Limit += s.Limit
		t.Hits += s.Hits
		t.Misses += s.Misses
		t.Evictions += s.Evictions
		t.OOMs += s.OOMs
		out[s.Device] = t
	}
	return out
}

// sumCaches adds up caches that share a name.
func sumCaches(caches []mask.CacheStats) map[string]mask.CacheStats {
	out := make(map[string]mask.CacheStats, len(caches))
	for _, s := range caches {
		t := out[s.Name]
		t.Name = s.Name
		t.Bytes += s.Bytes
		t.Entries += s.Entries
		t.MaxBytes += s.MaxBytes
		t.Hits += s.Hits
		t.Misses += s.Misses
		t.Evictions += s.Evictions
		out[s.Name] = t
	}
	return out
}

// forecastKey is a device and what runs out on it.
type forecastKey struct{ device, of string }

// shorter keeps in shortest the shorter of its forecast for k and d, in
// whole seconds, rounded up (a forecast under a second is 1); d of 0 is
// unknown and kept nowhere.
func shorter(shortest map[forecastKey]int64, k forecastKey, d time.Duration) {
	if d <= 0 {
		return
	}
	secs := int64((d + time.Second - 1) / time.Second)
	if cur, ok := shortest[k]; !ok || secs < cur {
		shortest[k] = secs
	}
}
