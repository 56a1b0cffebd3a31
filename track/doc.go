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
// as in the standard library. Record and Release cost one walk, a lookup
// without a lock, one of 64 shard locks and a few atomics: about 0.16x one
// runtime.Callers (BenchmarkRecordReleaseRatio).
//
// # For allocator implementers
//
// Programs never need these; packages tensor and pool use them: Record, Meta
// and InternMeta; Tracker.Record, Release, SetLabels, HandOver, HandBack,
// ReportDropped, Note and NoteMisuse; Record.Hold and Unhold; Caller,
// CallerSite, Intern, FreeLine and FreeSite; Attach, Detach, Parts, Local
// and Reserver, through which what is made with a tracker attaches to it
// (the tracker is the hub its readers need alone); and SiteFeed, HeldBy,
// WatchLeaks and MisuseSince for the watcher and tracktest.
package track
