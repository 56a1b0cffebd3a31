// Package track is tensorlife's live registry of device allocations: which
// tensors are alive, how many bytes they hold, which line made each one,
// and which of them outlived the request that made it.
//
// A Tracker records allocations and releases them; package tensor records
// every tensor it makes in its allocator's tracker, most programs in
// Default. An allocation carries its bytes, kind, device, dtype and shape,
// the labels of its context (WithLabels, as pprof.Labels) and its call site.
//
// # Requests
//
// A service marks where a request begins: WithRequest, or the first
// WithLabels on a context that ends with the request, as net/http's and
// gRPC's do. A tensor still live when its request ends has outlived it
// (Filter.Outlived, SiteStats.OutlivedBytes): what the growth watcher in
// package track/watch judges. A tensor kept on purpose is handed to an
// Owner (Tracker.HandOver); one with a byte bound is never judged.
//
// # Call sites
//
// A Site is a call stack, captured by following frame pointers through a
// cache of walks (runtime.Callers on a miss: sites are exactly what it
// gives) and symbolized only when a report asks. At most MaxSites stacks are
// kept; further ones count under "tensorlife.StackTableOverflow", so lost
// detail shows. Site.Location is the line to change: the first frame outside
// tensorlife and outside allocation helpers (Helper, HelperFunctions).
//
// # Snapshots and leaks
//
// Snapshot copies the live set: per-site totals, groups (what a profile
// sample stands for) and, on request, each allocation with the handles that
// hold it. SnapshotOf takes a Filter; Diff tells what grew; Totals and
// SiteTotals read counters only. A handle the garbage collector finds
// unreachable without Free is reported through OnLeak and counted; double
// frees and uses after free are noted as misuse, which tracktest turns into
// test failures. KeepHistory keeps a bounded ring of events for package
// timeline.
//
// # Rules
//
// A Tracker is safe for concurrent use. Methods on a nil *Tracker return
// ErrNilTracker or zero figures; a nil receiver of every other type is a
// bug and panics, as in the standard library. Recording and releasing take
// one frame-pointer walk, a lookup without a lock, one of 64 shard locks and
// a few atomics: about 0.14x one runtime.Callers (BenchmarkRecordReleaseRatio).
//
// # For allocator implementers
//
// Programs never call these; package tensor and package pool do. Record,
// Meta and InternMeta describe an allocation; Tracker.Record, Release,
// SetLabels, HandOver, ReportDropped, Note and NoteMisuse keep the books;
// Record.Hold and Unhold count extra owners; Caller, CallerSite, CallerPCs
// and Intern name the site of an event; Attach and Reserver count an
// allocator's device memory; SiteFeed, HeldBy, WatchLeaks and MisuseSince
// serve the watcher and tracktest.
package track
