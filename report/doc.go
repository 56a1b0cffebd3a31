// Package report writes tensorlife's memory summary, in the manner of
// torch.cuda.memory_summary, and reads the figures other packages keep of
// device memory: pools (pool.Stats), mask caches (mask.CacheStats), devices
// (their MemInfo) and a growth watcher, gathered in Sources.
//
//	src := report.Sources{Pools: []report.PoolSource{p}, Devices: []report.DeviceSource{dev}, Watcher: w}
//	err := report.WriteSummary(os.Stderr, tracker, report.WithSources(src))
//
// The summary reads counters only, never the live set, so it costs the same
// at a thousand live tensors as at a million. Sources.Read gives the same
// figures to code of its own, each pool read once, so that a pool's row and
// its device's split agree; the OpenTelemetry bridge (track/oteltrack)
// publishes them from one Sources value too. The device split tells the
// memory tensorlife's allocators hold (track.Reserver) from what the device
// reports as used outside them.
package report
