// Package report writes tensorlife's memory summary, in the manner of
// torch.cuda.memory_summary, and reads the figures other packages keep of
// device memory: pools (pool.Stats), mask caches (mask.CacheStats), devices
// (their MemInfo) and growth watchers. Everything made with a tracker
// attached itself to it, so the tracker is all a summary needs:
//
//	err := report.WriteSummary(os.Stderr, tracker)
//
// Figures made without the tracker (a device no allocator of it draws
// from) are added with WithSources.
//
// The summary reads counters only, never the live set, so it costs the same
// at a thousand live tensors as at a million. Sources.Read gives the same
// figures to code of its own, each pool read once, so that a pool's row and
// its device's split agree; the OpenTelemetry bridge (oteltrack)
// publishes them the same way. The device split tells the memory
// tensorlife's parts hold (track.PartInfo) from what the device
// reports as used outside them.
package report
