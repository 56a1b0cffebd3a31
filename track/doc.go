// Package track is tensorlife's live registry of device allocations: what is
// alive, the line that made it, and whether it outlived its request.
//
// A Tracker records and releases allocations (package tensor records every
// tensor; most programs use Default), each with its bytes, kind, device,
// dtype, shape, context labels (WithLabels, as pprof.Labels) and call site.
//
// A request begins at WithRequest, or at the first WithLabels on a context
// that ends with the request, as net/http's and gRPC's do; it ends when its
// context is done, and every reader sees that at once. A tensor still live
// when its request ends has outlived it (Filter.Outlived,
// SiteStats.OutlivedBytes): what package track/watch judges. WithLabels on a
// worker's long-lived context begins a job per call; a job also ends once 64
// later jobs of that context have allocated. A tensor kept on purpose is
// handed to an Owner until the owner hands it back; what each owner holds
// is counted (Owners), and an owner is held weakly.
//
// A Site is a call stack, captured by a frame-pointer walk through a cache
// (runtime.Callers on a miss, so sites are exactly what it gives) and
// symbolized when a report asks. Past MaxSites stacks, allocations count
// under "tensorlife.StackTableOverflow". Site.Location is the line to change:
// the first frame outside tensorlife and the tracker's allocation helpers
// (HelperFunctions).
//
// Snapshot copies the live set: per-site totals, groups (profile samples)
// and, on request, each allocation with the handles that hold it; Diff tells
// what grew; Totals, SiteTotals and the default profile's snapshot (no
// filter, no label) read counters only. A handle the
// collector finds unreachable without Free is reported (OnLeak); double frees
// and uses after free are noted as misuse, which tracktest fails tests on.
//
// A Tracker is safe for concurrent use. A nil receiver of any type is a bug,
// as in the standard library.
//
// # Costs
//
// Record and Release cost one frame-pointer walk, a lookup without a lock,
// one of 64 shard locks and a few atomics (one add for the site's
// figures): 0.20-0.25x one runtime.Callers over the same 20 frames, about
// 300-440 ns against 1.2-2.3 µs (BenchmarkRecordReleaseRatio, where Record
// is reached through two frames, as tensor.New reaches it). A request is
// listed once per tracker, at its first record (one of 16 locks); every
// reader settles the listed requests first, O(requests open). A request
// begun by WithLabels with 8 tensors costs 1.17-1.19x the same cancellable
// context without one, 1.14x one whose Done channel a handler made, and
// 0.96x one begun by WithRequest (BenchmarkWithLabelsRequestRatio).
//
// Every reader but the views that show per-tensor detail reads counters
// kept on the record path: the default profile's snapshot is O(sites ×
// shapes), trackalloc.HeldBy O(sites × holders), Site.Stats O(shapes of
// the site), a window's site feed O(sites that changed), Owners
// O(owners), and none holds a shard lock longer than one record's update,
// so an out-of-memory error built from them costs the same at any live
// count. The bounds that keep these costs: a site counts at most 64 (Meta,
// size) pairs apart, the rest in one group marked Group.OtherShapes (two
// atomic adds at Record and two at Release instead of one each, and a map
// lookup to place it); it counts at most 16 holders apart, the rest as
// handles made at other sites. Measured as same-run ratios on a shared
// 2-core machine: an out-of-memory error at 100k live tensors costs
// 0.98-1.05x the one at 10k (pool BenchmarkOOMCostIsFlatInLiveTensors);
// during an OOM storm another goroutine's Record+Release p99 is
// 1.09-1.14x its calm one (BenchmarkRecordDuringOOMStorm); a default
// scrape at 1M live tensors costs 0.86-0.97x the one at 10k, and
// 0.88-1.26x with 256 shapes per site (pprofexport
// BenchmarkScrapeCostIsFlatInLiveTensors); a window end reads 45-75 ns per
// site that changed, no more per site when 10k changed than when 100 did
// (BenchmarkWindowEnd).
//
// # For allocator implementers
//
// Record, Meta and InternMeta are what an allocator embeds and fills;
// recording, releasing, handing over, the lines of handles and frees, the
// site feed, leak subscriptions and the parts that attach to a tracker are
// package track/trackalloc's, which packages tensor and pool use as any
// third-party allocator would. Programs never need it.
package track
