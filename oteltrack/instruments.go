package oteltrack

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// instruments are the observable instruments one registration owns.
type instruments struct {
	tensorCount, tensorMemory, peak, allocated, outlived  metric.Int64Observable
	allocs, frees, leaks, doubleFrees, ooms, maskRebuilds metric.Int64Observable
	poolUsage, poolLimit                                  metric.Int64Observable
	poolHits, poolMisses, poolEvictions, poolOOMs         metric.Int64Observable
	cacheUsage, cacheLimit, cacheEntries                  metric.Int64Observable
	cacheHits, cacheMisses, cacheEvictions                metric.Int64Observable
	deviceUsage, deviceLimit, gpuUsage, gpuLimit          metric.Int64Observable
	suspects, flags, windows, stackFallbacks              metric.Int64Observable
	stackUncached, freeLinesLost, runsOutIn               metric.Int64Observable
	ownerUsage, ownerLimit, ownerTensors, partPanics      metric.Int64Observable
	leakReportsLost                                       metric.Int64Observable
	requestsOpen, requestsInFlight                        metric.Int64Observable
	requestOldestAge, requestLargest                      metric.Int64Observable
	requestPeakP50, requestPeakP99, requestPeakMax        metric.Int64Observable

	// requestPeaks is the one synchronous instrument: OpenTelemetry has
	// no observable histogram, so the callback records into it what the
	// tracker's per-kind histograms counted since the last collection.
	requestPeaks metric.Int64Histogram
}

// peakBoundaries are requestPeaks' buckets, an octave each, from 1 KiB to
// 1 TiB: 2^e-1, since a bucket holds the values up to its bound, so that
// bucket e holds the integers in [2^(e-1), 2^e); peaks under 1 KiB fall in
// the first bucket, those of 1 TiB and more in the +Inf one. A bucket of
// the tracker's (1/8 of an octave) lies inside one of them, so the counts
// are exact, but a quantile read from them (histogram_quantile) is only
// within an octave: the p50, p99 and max gauges beside it are the
// summary's own, within one 1/8-octave bucket.
var peakBoundaries = func() []float64 {
	var out []float64
	for e := 10; e <= 40; e++ {
		out = append(out, float64(int64(1)<<e-1))
	}
	return out
}()

// spec describes one instrument: where it goes and what it is.
type spec struct {
	dst  *metric.Int64Observable
	kind int // gauge, upDown or counter
	name string
	unit string
	desc string
}

const (
	gauge = iota
	upDown
	counter
)

// create makes every instrument and returns them for the callback
// registration. Those of pools, caches, devices and watchers are made
// whether or not the tracker has any yet: its parts attach later, and an
// instrument with nothing to observe exports no series.
func (in *instruments) create(meter metric.Meter) ([]metric.Observable, error) {
	specs := []spec{
		{&in.tensorCount, upDown, "tensorlife.tensor.live", "{tensor}", "Live tensors, recorded and not freed."},
		{&in.tensorMemory, upDown, "tensorlife.tensor.memory.usage", "By", "Device bytes held by live tensors."},
		{&in.peak, gauge, "tensorlife.tensor.memory.peak", "By", "Highest live tensor bytes since the tracker started."},
		{&in.outlived, upDown, "tensorlife.tensor.memory.outlived", "By", "Device bytes of live tensors that outlived the request that made them: what the growth watcher judges."},
		{&in.allocated, counter, "tensorlife.tensor.memory.allocated", "By", "Tensor bytes allocated since the tracker started."},
		{&in.allocs, counter, "tensorlife.tensor.allocations", "{allocation}", "Tensors allocated."},
		{&in.frees, counter, "tensorlife.tensor.frees", "{free}", "Tensors freed."},
		{&in.leaks, counter, "tensorlife.tensor.leaks", "{tensor}", "Tensors the garbage collector found without Free."},
		{&in.doubleFrees, counter, "tensorlife.tensor.double_frees", "{free}", "Tensor handles freed twice."},
		{&in.ooms, counter, "tensorlife.tensor.oom_errors", "{error}", "Allocations refused for lack of memory."},
		{&in.maskRebuilds, counter, "tensorlife.mask.rebuilds", "{mask}", "Masks built again where they should have grown."},
		{&in.stackFallbacks, counter, "tensorlife.stack.fallbacks", "{capture}", "Stack captures the frame-pointer walk could not serve, taken by runtime.Callers."},
		{&in.stackUncached, counter, "tensorlife.stack.uncached", "{capture}", "Stack captures taken by runtime.Callers because the full walk cache could not keep their walk."},
		{&in.partPanics, counter, "tensorlife.part.panics", "{call}", "Calls into code tensorlife does not own (a part's or a device's method, a foreign release) that panicked; each was recovered, and its figure left out."},
		{&in.leakReportsLost, counter, "tensorlife.tensor.leak_reports_lost", "{report}", "Reports of dropped tensors a leak callback 4096 reports behind was not given; the leaks are counted in tensorlife.tensor.leaks all the same."},
		{&in.freeLinesLost, counter, "tensorlife.tensor.free_lines_lost", "{free}", "Frees whose line the full free-line table could not keep: a double-free report cannot name them."},
		// The open requests: facts, never judged (in flight is no leak).
		{&in.requestsOpen, upDown, "tensorlife.request.open", "{request}", "Requests open now that have recorded a tensor."},
		{&in.requestsInFlight, upDown, "tensorlife.request.memory.in_flight", "By", "Device bytes the open requests hold in flight: made under them, neither freed nor handed to an owner."},
		{&in.requestOldestAge, gauge, "tensorlife.request.oldest.age", "s", "How long the oldest open request has been open."},
		{&in.requestLargest, gauge, "tensorlife.request.largest.memory.in_flight", "By", "In-flight bytes of the open request holding most."},
		{&in.requestPeakP50, gauge, "tensorlife.request.memory.peak.p50", "By", "Median peak in-flight bytes of the ended requests, by request kind and device, as the memory summary states it (within one 1/8-octave bucket)."},
		{&in.requestPeakP99, gauge, "tensorlife.request.memory.peak.p99", "By", "99th percentile of the peak in-flight bytes of the ended requests, by request kind and device, as the memory summary states it (within one 1/8-octave bucket)."},
		{&in.requestPeakMax, gauge, "tensorlife.request.memory.peak.max", "By", "Largest peak in-flight bytes of an ended request, by request kind and device, exact."},
		// The parts' instruments.
		{&in.poolUsage, upDown, "tensorlife.pool.memory.usage", "By", "Bytes pools hold from the device, by state: active (handed out) or cached (kept for reuse)."},
		{&in.poolLimit, upDown, "tensorlife.pool.memory.limit", "By", "Memory budget of the pools on a device."},
		{&in.poolHits, counter, "tensorlife.pool.hits", "{allocation}", "Allocations served from a pool's cache."},
		{&in.poolMisses, counter, "tensorlife.pool.misses", "{allocation}", "Allocations a pool sent to its device."},
		{&in.poolEvictions, counter, "tensorlife.pool.evictions", "{block}", "Cached blocks a pool returned to its device."},
		{&in.poolOOMs, counter, "tensorlife.pool.oom_errors", "{error}", "Allocations a pool refused for lack of memory."},
		{&in.cacheUsage, upDown, "tensorlife.mask.cache.memory.usage", "By", "Bytes a mask cache holds."},
		{&in.ownerUsage, upDown, "tensorlife.owner.memory.usage", "By", "Bytes of the tensors handed to an owner."},
		{&in.ownerLimit, upDown, "tensorlife.owner.memory.limit", "By", "An owner's byte bound."},
		{&in.ownerTensors, upDown, "tensorlife.owner.tensor.live", "{tensor}", "Tensors handed to an owner."},
		{&in.cacheLimit, upDown, "tensorlife.mask.cache.memory.limit", "By", "A mask cache's byte budget."},
		{&in.cacheEntries, upDown, "tensorlife.mask.cache.entry.live", "{entry}", "Entries a mask cache holds."},
		{&in.cacheHits, counter, "tensorlife.mask.cache.hits", "{lookup}", "Mask cache lookups that found a mask."},
		{&in.cacheMisses, counter, "tensorlife.mask.cache.misses", "{lookup}", "Mask cache lookups that found none."},
		{&in.cacheEvictions, counter, "tensorlife.mask.cache.evictions", "{entry}", "Masks a cache evicted to keep its bounds."},
		{&in.deviceUsage, upDown, "tensorlife.device.memory.usage", "By", "Device memory by state: tensorlife (held by tensorlife's allocators), outside (used, not held by tensorlife) or free."},
		{&in.deviceLimit, upDown, "tensorlife.device.memory.limit", "By", "Total memory of the device."},
		{&in.gpuUsage, upDown, "hw.gpu.memory.usage", "By", "GPU memory used, device-wide."},
		{&in.gpuLimit, upDown, "hw.gpu.memory.limit", "By", "Size of the GPU memory."},
		{&in.suspects, upDown, "tensorlife.watcher.suspect.active", "{site}", "Current leak suspects."},
		{&in.flags, counter, "tensorlife.watcher.flags", "{site}", "Times the growth watcher flagged a site as a leak suspect."},
		{&in.windows, counter, "tensorlife.watcher.windows", "{window}", "Windows the growth watcher ended."},
		{&in.runsOutIn, gauge, "tensorlife.watcher.suspect.runs_out_in", "s", "Shortest forecast, over the current leak suspects on a device, of the time until the memory they draw from (a pool budget, else the device's free memory) runs out at their growth rate."},
	}
	var err error
	in.requestPeaks, err = meter.Int64Histogram("tensorlife.request.memory.peak", metric.WithUnit("By"),
		metric.WithDescription("Peak in-flight bytes of each ended request, by request kind (track.RequestKinds) and device."),
		metric.WithExplicitBucketBoundaries(peakBoundaries...))
	if err != nil {
		return nil, fmt.Errorf("tensorlife.request.memory.peak: %w", err)
	}
	out := make([]metric.Observable, 0, len(specs))
	for _, s := range specs {
		var err error
		switch s.kind {
		case gauge:
			*s.dst, err = meter.Int64ObservableGauge(s.name, metric.WithUnit(s.unit), metric.WithDescription(s.desc))
		case upDown:
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
