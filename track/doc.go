// Package track is tensorlife's live registry of device allocations: what is
// alive, the line that made it, and whether it outlived its request.
//
// A Tracker records every tensor (package tensor does it; most programs use
// Default) with its bytes, kind, device, dtype, shape, context labels
// (WithLabels, as pprof.Labels) and call site.
//
// A request begins at WithRequest or BeginRequest, or at the first
// WithLabels on a context that ends with the request, as net/http's and
// gRPC's do; it ends when its end function runs or its context is done.
// Every reader sees an end function's end at once; the end of a context
// tensorlife did not make, the readings that show or judge a request see at
// once, and the gauges within a few readings (Tracker.Totals says how
// many). A tensor still live
// when its request ends has outlived it (Filter.Outlived,
// SiteStats.OutlivedBytes): what package track/watch judges. A tensor kept
// on purpose is handed to an Owner, whose holdings are counted (Owners).
// OpenRequests lists the requests open now, the largest and the oldest, with
// what each holds in flight: facts, never judged.
//
// A Site is a call stack, captured by a frame-pointer walk through a cache
// and symbolized when a report asks; Site.Location is the line to change,
// the first frame outside tensorlife and the tracker's helpers
// (HelperFunctions). Past MaxSites stacks, allocations count under
// "tensorlife.StackTableOverflow".
//
// Snapshot copies the live set: per-site totals, groups (profile samples)
// and, on request, each allocation with the handles that hold it. Totals,
// SiteTotals, TopSites and the default profile's snapshot (no filter, no
// label) read counters only, so they cost the same at any live count. A
// handle the collector finds unreachable without Free is counted at once
// and reported (OnLeak, WatchLeaks) on a goroutine of tensorlife's, never
// on the runtime's cleanup goroutine, so a callback that blocks, panics or
// calls runtime.Goexit stalls no finalizer of the process;
// Books.WaitLeaks waits until the reports made so far are delivered.
// Double frees and uses after free count as misuse, which tracktest fails
// tests on.
//
// A Tracker is safe for concurrent use. A nil receiver of any type is a bug,
// as in the standard library: every method panics on a nil *Tracker. Attach
// and Detach, which an untracked part calls with its nil tracker, do
// nothing then.
//
// # For allocators and tools
//
// Programs that serve requests need only the above, with packages tensor and
// pool: the methods of *Tracker are a service's API. Those who write
// allocators and tools over a Tracker use the rest, kept in this package
// beside the registry it touches (as runtime/pprof keeps Profile.Add beside
// Lookup) and apart by type (as log/slog keeps a Handler's API apart from a
// Logger's): the methods of *Books (Tracker.Books, the same tracker), of
// *Record, and the part contract. Every call can be followed from caller to
// callee: tensor and pool use it as any third-party allocator would.
//
// An allocator embeds a Record in what it hands out, fills Bytes and Meta,
// and calls Books.Record when it allocates; from then on what happens to
// the allocation is a method of its Record, which knows its tracker (as
// log/slog keeps a Record's methods apart from the Logger's): Record.Release
// when the memory goes back, Record.Hold and Record.Unhold for each extra
// handle, Record.ReportDropped for a handle the garbage collector finds
// dropped, Record.HandOver and Record.HandBack to move it to an Owner and
// back, Record.SetLabels, and Record.NoteMisuse to log a double free or a
// use after free for tests (Books.MisuseSince). A record cannot be
// released through a tracker other than its own: no call names one.
// Skips are as in pprof.Profile.Add: 0 is the caller of the method, and
// every function they pass over must be //go:noinline.
//
// A pool, a cache, a watcher, a device's adoptions or a third party's
// allocator is a Part: it says what it is and what device memory it holds
// (PartInfo), and attaches itself to its tracker (Attach). Readers read
// parts through one seam, Read (Books.PartInfos for every part's PartInfo), and a
// package keeps its own state per tracker in a Local. Tools read counters
// through Books: CopyCounts (the default
// profile's snapshot, copied for later), History (the events, KeepHistory),
// LiveByClass, ReservedOn, HeldBy, a SiteFeed (the sites whose outlived
// figures changed, what a watcher reads each window), WatchLeaks and
// WaitLeaks. A
// tool that writes each group as it reads it (a profile's encoder) takes
// them apart from their snapshot with GroupsOf, and holds none of them.
//
// A part's methods, a device's and a foreign release are code tensorlife does
// not own: a reading calls parts through Read, and every other call into
// them runs under Guard, which Read uses too; it turns a panic into an
// error matching ErrPanic, counted in Totals.PartPanics and logged once per
// part and method (NotePanic).
//
// # Errors for bad input
//
// Every entry point answers bad input with an error that errors.Is
// matches, never a panic (TestBadInputGetsTypedErrors feeds each its own):
//   - New and AdapterPackages: ErrInvalidOption, for an option or prefix
//     that cannot be used (a zero MaxSites, an empty Name, a nil callback or
//     logger, a nil option).
//   - Tracker.SnapshotOf and Books.GroupsOf: ErrInvalidOption, for a Filter
//     that cannot match (a negative MinAge, Outlived with InFlight, a
//     Request context under no request).
//   - Books.Record and RecordAt: ErrMisuse, for a nil record, negative
//     bytes, or a record recorded already; the Record methods (Release,
//     SetLabels, HandOver, HandBack, HandBackDropped): ErrMisuse, for a nil
//     record, one never recorded, one released, a nil owner, or a hand-back
//     of an owner that holds nothing.
//   - Tracker.History: ErrHistoryOff, for a tracker made without KeepHistory.
//   - Local.Of: ErrTooManyLocals, past MaxLocals Locals in one tracker.
//   - Functions above track given a nil tracker: ErrNilTracker.
//
// # Costs
//
// Record and Release cost one frame-pointer walk, a lookup without a lock,
// one of 64 shard locks and a few atomics (one add for the site's figures);
// BenchmarkRecordReleaseRatio measures them against one runtime.Callers over
// the same 20 frames. A request is listed once per tracker, at its first
// record (one of 16 locks), and its end takes it out again (O(log open)),
// paid by whoever ends it. No reader pays for what is open: the book keeps
// the largest and the oldest requests as they grow and end, so that
// OpenRequests costs what changed since its last read and O(n log open),
// and a reading of the gauges looks at 32 listed requests' contexts in
// turn, to see the ends of requests begun by WithLabels (whose contexts'
// cancels tensorlife cannot hook without a goroutine each): Totals says
// how soon. A request's end with RequestKinds takes one tracker-wide lock,
// once per request.
//
// Every reader but the views that show per-tensor detail reads counters
// kept on the record path: the default profile's snapshot is O(sites ×
// shapes), HeldBy O(sites × holders), Site.Stats O(shapes of the site), a
// window's site feed O(sites that changed), Owners O(owners), and none holds
// a shard lock longer than one record's update, so an out-of-memory error
// built from them costs the same at any live count. The bounds that keep
// these costs: a site counts at most 64 (Meta, size) pairs apart, the rest in
// one group marked Group.OtherShapes; it counts at most 16 holders apart, the
// rest as handles made at other sites.
//
// No figure wraps, however large the records: every byte figure reads the
// exact sum, or MaxInt64 past it. A site counts a (Meta, size) pair's
// records, read as count × size in 128 bits; its other byte sums keep a
// record below 2^32 bytes in atomic int64 sums (which 2^32 such records live
// at one site, hundreds of GiB of host memory for the records alone, would
// be needed to wrap) and a record of 2^32 bytes or more in 128-bit sums
// under a lock of the site's, which a reader holds while it reads both
// parts, so that they are of one moment. A record below 2^32 bytes pays a
// compare for it; only records of 4 GiB or more take the lock.
package track
