// Package track is tensorlife's live registry of device allocations: what is
// alive, the line that made it, and whether it outlived its request.
//
// A Tracker records every tensor (package tensor does it; most programs use
// Default) with its bytes, kind, device, dtype, shape, context labels
// (WithLabels, as pprof.Labels) and call site.
//
// A request begins at WithRequest, or at the first WithLabels on a context
// that ends with the request, as net/http's and gRPC's do; it ends when its
// context is done, and every reader sees that at once. A tensor still live
// when its request ends has outlived it (Filter.Outlived,
// SiteStats.OutlivedBytes): what package track/watch judges. A tensor kept
// on purpose is handed to an Owner, whose holdings are counted (Owners).
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
// handle the collector finds unreachable without Free is reported (OnLeak);
// double frees and uses after free count as misuse, which tracktest fails
// tests on.
//
// Record and Release cost 0.20-0.25x one runtime.Callers over the same
// frames; package track/trackalloc, the API of allocators and tools (which
// packages tensor and pool use as any third-party allocator would), lists
// every cost and bound. Record, Meta and InternMeta are what an allocator
// embeds and fills; programs never need them.
//
// A Tracker is safe for concurrent use. A nil receiver of any type is a bug,
// as in the standard library.
package track
