// Package track is tensorlife's live registry of device allocations: which
// tensors are alive, how many bytes they hold, and which line of code made
// each one.
//
// A Tracker records allocations (Record) and releases them (Release). It
// knows nothing about tensors or devices: a Record carries bytes and a
// shared Meta (kind, device name, dtype and shape as plain values, interned
// by InternMeta), and the tracker adds an
// id, the time, the labels of the context the allocation was made under
// (WithLabels, in the manner of pprof.Labels) and the call site. Package
// tensor records every tensor it makes in the Tracker of the tensor's
// allocator; most programs use Default.
//
// # Call sites
//
// A site is the call stack of an allocation, captured as program counters
// and symbolized only when a report or profile asks (Site.Frames). The
// record path follows frame pointers and looks the walk up in a cache of
// sites; only a stack never seen before pays for runtime.Callers, and the
// site is exactly what runtime.Callers gives (see FramePointers). Stacks are interned in a bounded table whose lookups
// take no lock (a new stack is inserted under one, once per distinct stack):
// identical stacks share one Site, and once MaxSites sites exist, further
// stacks are counted under one overflow site that every report shows as
// "tensorlife.StackTableOverflow", so lost detail is visible, never silently dropped.
// Site.Location is the first frame outside tensorlife's own packages and
// outside allocation helpers: the caller's line that asked for memory. A
// function that allocates on behalf of its callers marks itself with Helper,
// as a test helper calls testing.T.Helper:
//
//	func newKV(ctx context.Context, p tensor.Allocator, n int) (*tensor.Tensor, error) {
//		track.Helper()
//		return tensor.New(ctx, p, tensor.Float16, 2, n, 128)
//	}
//
// and the HelperFunctions option marks functions or packages the program
// cannot edit. Reports, suspects, OOM errors and profiles then name the
// helper's caller; when two stacks share that line, Site.DistinctFrame
// gives the frame that tells them apart.
//
// # Snapshots
//
// Snapshot copies the live set at one moment: per-site totals (live count
// and bytes, allocations and bytes since start), groups of allocations that
// share site, kind, dtype, shape and labels (what a profile sample stands
// for), and, on request, every allocation with the handles that hold it
// (Allocation.Holders: the allocation's own handle, Views, Retains, cache
// entries, by the line that made them). SnapshotOf takes a Filter (minimum
// age or watcher windows outlived, kind, device, labels, GC-found leaks). Diff tells what grew and what shrank
// between two snapshots. Totals and SiteTotals read counters only, cheaply
// enough for metrics and for a growth watcher that samples every request.
//
// # Leaks
//
// Package tensor attaches a runtime finalizer to each tensor handle; if the
// garbage collector finds a handle unreachable before Free, the tensor
// calls ReportDropped, which counts the leak per handle, flags the record
// and reports it through the OnLeak callback (default: a log/slog warning
// with the stack of the line that made the handle). Double frees and uses
// after free are noted as misuse, which tracktest turns into test failures. ReclaimLeaks decides whether the memory is then
// returned (default yes, so a leaking service survives while it reports).
// Nothing in the registry points at a tensor handle, so the registry never
// keeps a leaked handle reachable.
//
// # Watching a live service
//
// A Watcher ends windows (a number of Tick calls, one per request, or a time
// interval) and judges, per site, the bytes of tensors that outlived their
// window (per-site counters by birth window, kept on the record path in
// O(1)): memory in flight is never a suspect, however large, while a site
// whose survivors keep growing is named, with the handles that hold its
// memory. Suspects are reported through a callback, counted, and listed by
// WriteSummary, a text report in the manner of torch.cuda.memory_summary
// that reads counters only. Pools and direct allocators attach themselves
// to their tracker (Attach), so reports can tell the memory tensorlife
// holds on a device from the memory used outside it (Sources.Read). Reports and metrics read pools, caches and
// devices through small interfaces (PoolSource, CacheSource, DeviceSource)
// gathered in Sources; track imports none of those packages. Package
// track/oteltrack publishes the same figures through OpenTelemetry; it is a
// package of its own so that importing track, or tensor, links no
// OpenTelemetry and no net/http.
//
// # Options
//
// One Option type serves New, NewWatcher and WriteSummary; each option's
// doc says where it applies, and passing it elsewhere is an error matching
// ErrInvalidOption that names it, as an invalid value or a nil option is.
//
// # History
//
// With the KeepHistory option the tracker also keeps a bounded ring of
// recent events (allocations, frees, GC-found leaks, OOMs, rebuilt masks,
// leak suspects); package timeline turns it into a trace and a picture.
//
// # For allocator implementers
//
// Most programs never call these: package tensor and package pool do. An
// allocator that records its own allocations embeds a Record in each block
// and calls Tracker.Record and Tracker.Release; Record.Hold and Unhold for
// extra owners; Tracker.ReportDropped from a finalizer when a handle is
// dropped unreachable; Attach to count its reserved bytes on its device; Tracker.Note for
// events the registry cannot see (an out-of-memory refusal, a double free);
// Tracker.Caller and Tracker.Intern to name the site of such an event; and
// Tracker.WatchLeaks to hear of leaks as they are found (tracktest does).
//
// # Cost
//
// The record and release paths take one frame-pointer walk into a fixed
// buffer, one site-cache lookup that takes no lock, one lock of one of 64
// registry shards (an intrusive list insert or remove and the per-shard
// counters by device and kind, no allocation), the site's small age lock,
// and a few atomics: the per-site counters and the tracker-wide live bytes
// the peak is computed from. There is no global lock; a Record and Release
// cost about 0.13x one runtime.Callers (BenchmarkRecordReleaseRatio). A
// Tracker is safe for concurrent use.
package track
