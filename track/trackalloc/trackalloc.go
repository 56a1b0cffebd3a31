// Package trackalloc is package track for those who write allocators and tools
// over a Tracker: recording and releasing allocations, handing them to owners,
// the call sites of handles and frees, misuse notes, the site feed and leak
// subscriptions a watcher or a test helper reads, the counters a dump, a
// timeline or a metrics bridge reads (Counts, History, LiveByClass,
// ReservedOn), and the parts (pools, caches, watchers) that attach to their
// tracker. Package tensor and pool use it as any third-party allocator would.
// Programs that serve requests never need it: they use track, tensor and pool.
//
// An allocator embeds a track.Record in what it hands out, fills Bytes and
// Meta, and calls Record when it allocates and Release when the memory goes
// back; each extra handle is counted with Hold and Unhold, and a handle the
// garbage collector finds dropped is reported with ReportDropped. Skips are as
// in pprof.Profile.Add: 0 is the caller of the trackalloc function, and every
// function they pass over must be //go:noinline.
//
// Every function is safe for concurrent use, as the Tracker is.
//
// # Costs
//
// Record and Release cost one frame-pointer walk, a lookup without a lock, one
// of 64 shard locks and a few atomics (one add for the site's figures):
// 0.20-0.25x one runtime.Callers over the same 20 frames, about 300-440 ns
// against 1.2-2.3 µs (BenchmarkRecordReleaseRatio, where Record is reached
// through two frames, as tensor.New reaches it). A request is listed once per
// tracker, at its first record (one of 16 locks); every reader settles the
// listed requests first, O(requests open). A request begun by track.WithLabels
// with 8 tensors costs 1.16-1.17x the same cancellable context without one,
// 1.12-1.13x one whose Done channel a handler made, and 0.96x one begun by
// track.WithRequest (BenchmarkWithLabelsRequestRatio).
//
// Every reader but the views that show per-tensor detail reads counters kept
// on the record path: the default profile's snapshot is O(sites × shapes),
// HeldBy O(sites × holders), track.Site.Stats O(shapes of the site), a
// window's site feed O(sites that changed), track.Tracker.Owners O(owners),
// and none holds a shard lock longer than one record's update, so an
// out-of-memory error built from them costs the same at any live count. The
// bounds that keep these costs: a site counts at most 64 (Meta, size) pairs
// apart, the rest in one group marked track.Group.OtherShapes (two atomic adds
// at Record and two at Release instead of one each, and a map lookup to place
// it); it counts at most 16 holders apart, the rest as handles made at other
// sites. Measured as same-run ratios on a shared 2-core machine: an
// out-of-memory error at 100k live tensors costs 0.98-1.05x the one at 10k
// (pool BenchmarkOOMCostIsFlatInLiveTensors); during an OOM storm another
// goroutine's Record+Release p99 is 1.09-1.14x its calm one
// (BenchmarkRecordDuringOOMStorm); a default scrape at 1M live tensors costs
// 0.86-0.97x the one at 10k, and 0.88-1.26x with 256 shapes per site
// (pprofexport BenchmarkScrapeCostIsFlatInLiveTensors); a window end reads
// 45-75 ns per site that changed, no more per site when 10k changed than when
// 100 did (BenchmarkWindowEnd).
package trackalloc

import (
	"context"
	"runtime"
	"weak"

	"github.com/tensorlife/tensorlife/internal/hotpath"
	"github.com/tensorlife/tensorlife/track"
)

// Record adds r to t under ctx's labels and request, capturing the stack
// skip frames above its caller. A nil r, a negative size or a record
// recorded before is an error matching track.ErrMisuse.
//
//go:noinline
func Record(ctx context.Context, t *track.Tracker, r *track.Record, skip int) error {
	return hotpath.Track.Record(ctx, t, r, skip)
}

// Release removes r from t; a second release is an error matching
// track.ErrMisuse.
func Release(t *track.Tracker, r *track.Record) error { return hotpath.Track.Release(t, r) }

// SetLabels replaces the labels of the live record r, for every handle (a
// cache labels what it adopts); a record not live is an error matching
// track.ErrMisuse.
func SetLabels(t *track.Tracker, r *track.Record, l track.Labels) error {
	return hotpath.Track.SetLabels(t, r, l)
}

// HandOver gives the live record r to o: r no longer outlives its request
// while o holds it. Each HandOver is undone by one HandBack: after the
// last, r is its request's again (outlived if the request has ended). A
// nil o, or r not live through t, is an error matching track.ErrMisuse.
func HandOver(t *track.Tracker, r *track.Record, o *track.Owner) error {
	return hotpath.Track.HandOver(t, r, o)
}

// HandBack undoes one HandOver of the live record r: its owner lets go of
// it. A record not handed over is an error matching track.ErrMisuse.
func HandBack(t *track.Tracker, r *track.Record) error { return hotpath.Track.HandBack(t, r) }

// ReportDropped reports a handle of r that the collector found dropped
// without Free: site is where the handle was made (nil for the record's
// own), how what made it ("Retain", "View"). It returns whether the handle's
// ownership is to be given up (track.ReclaimLeaks).
func ReportDropped(t *track.Tracker, r *track.Record, site *track.Site, how string) (reclaim bool) {
	return hotpath.Track.ReportDropped(t, r, site, how)
}

// Hold counts a handle on r made at site by how ("Retain", "View").
func Hold(r *track.Record, site *track.Site, how string) { hotpath.Track.Hold(r, site, how) }

// Unhold uncounts a handle counted by Hold, or, with a nil site, r's own.
func Unhold(r *track.Record, site *track.Site, how string) { hotpath.Track.Unhold(r, site, how) }

// Note counts an event of kind k at site, of bytes, in t's totals and its
// history if kept.
func Note(t *track.Tracker, k track.EventKind, site *track.Site, bytes int64) {
	hotpath.Track.Note(t, k, site, bytes)
}

// Caller interns up to depth (<= 32) frames of the caller's stack, skip as
// in Record: the site of an event that is not an allocation.
//
//go:noinline
func Caller(t *track.Tracker, skip, depth int) *track.Site {
	s, _ := hotpath.Track.Caller(t, skip, depth).(*track.Site)
	return s
}

// CallerSite returns the caller's site as Record captures it (skip as in
// Record): where an extra handle was made (Hold).
//
//go:noinline
func CallerSite(t *track.Tracker, skip int) *track.Site {
	s, _ := hotpath.Track.CallerSite(t, skip).(*track.Site)
	return s
}

// Intern returns t's site of pcs, leaf first.
func Intern(t *track.Tracker, pcs []uintptr) *track.Site {
	s, _ := hotpath.Track.Intern(t, pcs).(*track.Site)
	return s
}

// FreeLine numbers the line skip frames above its caller, for a misuse
// report to name later (FreeSite); 0 when t's table of lines is full.
//
//go:noinline
func FreeLine(t *track.Tracker, skip int) uint32 { return hotpath.Track.FreeLine(t, skip) }

// FreeSite returns the site of a line FreeLine numbered, and whether it
// ran from a defer statement; nil for 0.
func FreeSite(t *track.Tracker, n uint32) (site *track.Site, deferred bool) {
	s, deferred := hotpath.Track.FreeSite(t, n)
	site, _ = s.(*track.Site)
	return site, deferred
}

// HeldBy returns, per site, up to max extra owners holding its allocations
// after their own handles were freed, most first.
func HeldBy(t *track.Tracker, sites []*track.Site, max int) [][]track.Holder {
	hs, _ := hotpath.Track.HeldBy(t, sites, max).([][]track.Holder)
	return hs
}

// WatchLeaks calls f for every dropped handle t reports from now on, beside
// its OnLeak, until stop is called; f runs under recover.
func WatchLeaks(t *track.Tracker, f func(track.LeakReport)) (stop func()) {
	return hotpath.Track.WatchLeaks(t, f)
}

// A SiteFeed reports the sites of a tracker whose outlived figures changed,
// in time that grows with those alone: what a watcher reads at each window.
// For one goroutine at a time; Close it when done (a feed dropped without
// Close is closed by the collector).
type SiteFeed struct {
	feed any
}

// NewSiteFeed returns a new feed of t's sites.
func NewSiteFeed(t *track.Tracker) *SiteFeed {
	f := &SiteFeed{feed: hotpath.Track.SiteFeed(t)}
	runtime.AddCleanup(f, hotpath.Track.FeedClose, f.feed)
	return f
}

// Changed appends to dst the sites changed since the last call (on the
// first, all that have allocated). Requests whose contexts are done count as
// ended first.
func (f *SiteFeed) Changed(dst []track.SiteStats) []track.SiteStats {
	out, _ := hotpath.Track.FeedChanged(f.feed, dst).([]track.SiteStats)
	return out
}

// Close stops the feed.
func (f *SiteFeed) Close() { hotpath.Track.FeedClose(f.feed) }

// Reserver is what a tracker needs of an allocator that takes device memory:
// the device and the bytes it holds there. An attached part that is a
// Reserver counts as tensorlife's memory on its device (ReservedOn).
type Reserver interface {
	Reserved() (device string, bytes int64)
}

// Headroomer is an attached allocator that tells how much it may still
// take, found by type assertion on Allocators (a pool, a DeviceAllocator):
// a forecast of when a leak runs out of memory divides that by the leak's
// rate.
type Headroomer interface {
	Reserver
	// Headroom returns the allocator's budget in bytes (0: none) and the
	// bytes it may still take before an allocation fails: with a budget,
	// the budget less what its blocks hold; without, its device's free
	// memory, or -1 when the device cannot tell.
	Headroom() (budget, left int64)
}

// Attach adds part to t's parts, weakly, after those attached before it;
// attaching a part twice keeps its first place. Pools, DeviceAllocators,
// adoption books, watchers and mask caches attach themselves, so that a
// summary, a dump or a metrics bridge finds them from the tracker alone. A
// nil tracker or part attaches nothing.
func Attach[S any, P interface{ *S }](t *track.Tracker, part P) {
	if t == nil || part == nil {
		return
	}
	wp := weak.Make((*S)(part))
	hotpath.Track.Attach(t, wp, func() any {
		if s := wp.Value(); s != nil {
			return P(s)
		}
		return nil
	})
}

// Detach removes part from t's parts: what a part's Close or Stop calls, so
// that a closed part leaves the reports at once. Detaching a part not
// attached does nothing.
func Detach[S any, P interface{ *S }](t *track.Tracker, part P) {
	if t == nil || part == nil {
		return
	}
	hotpath.Track.Detach(t, weak.Make((*S)(part)))
}

// Parts returns the parts attached to t and still reachable, in the order
// they were attached. Readers pick the ones they know by type or interface;
// each is foreign code to t, asked for its figures outside t's locks.
func Parts(t *track.Tracker) []any { return hotpath.Track.Parts(t) }

// Allocators returns t's attached parts that are Reservers, in order.
func Allocators(t *track.Tracker) []Reserver {
	var out []Reserver
	for _, p := range Parts(t) {
		if r, ok := p.(Reserver); ok {
			out = append(out, r)
		}
	}
	return out
}

// Local returns what a package keeps in t under key, made by mk on first
// use: state scoped to a tracker (adoption books, a test helper's cursor)
// without a process-wide map keyed by trackers. Keys are compared as map
// keys; use an unexported type of the package's own.
func Local[T any](t *track.Tracker, key any, mk func() *T) *T {
	v, _ := hotpath.Track.Local(t, key, func() any { return mk() }).(*T)
	return v
}
