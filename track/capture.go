package track

import (
	"runtime"
	"slices"

	"github.com/tensorlife/tensorlife/internal/fpstack"
	"github.com/tensorlife/tensorlife/internal/intern"
)

// Stack capture. A site is named by the program counters runtime.Callers
// returns, but runtime.Callers costs about a microsecond at the depths an
// inference service allocates from, most of a tracked allocation. Following
// the frame-pointer chain (internal/fpstack) costs a twentieth of that, so
// the record path walks the chain and looks the walk up in a cache of sites
// keyed by the walked PCs. Only on a miss does it call runtime.Callers,
// intern the site from its PCs as before, and keep the cache entry if the
// two captures name the same frames (wrapper frames that runtime.Callers
// hides aside): sites are exactly what runtime.Callers alone would give.
//
// A walk the guards refuse (a corrupt chain, a fault) falls back to
// runtime.Callers and is counted (Totals.StackFallbacks); with the walk
// turned off (the FramePointers option, TENSORLIFE_STACK=callers) every
// capture is runtime.Callers's and nothing is counted. A walk that does not
// agree with runtime.Callers is cached as untrusted, counted
// (Totals.StackMismatches), and served by runtime.Callers from then on. Past
// a full cache, walks are not kept: each capture of a stack not cached is
// runtime.Callers's, counted (Totals.StackUncached).

// walkCache maps frame-pointer walks to sites in a fixed intern table.
// Lookups take no lock; an insert, once per distinct walk, takes one. The
// table never grows: when full, walks are not cached. Its probes are
// bounded by its size alone, at most half of it filled, so that a walk is
// refused only when the cache is full: a walk refused for crowded slots
// would be compared with runtime.Callers again on every capture.
type walkCache struct {
	table *intern.Table[walkEntry]
}

// walkEntry is one cached walk. site is nil for a walk that disagreed with
// runtime.Callers: untrusted, it is always served by runtime.Callers.
type walkEntry struct {
	hash uint64
	pcs  []uintptr
	site *Site
}

func newWalkCache(maxSites int) *walkCache {
	return &walkCache{table: intern.New[walkEntry](intern.Limits{Slots: 4 * maxSites, Values: 2 * maxSites, Probes: 4 * maxSites})}
}

// sameWalk returns the test that an entry is the walk pcs of hash h.
func sameWalk(h uint64, pcs []uintptr) func(*walkEntry) bool {
	return func(e *walkEntry) bool { return e.hash == h && slices.Equal(e.pcs, pcs) }
}

// full reports whether the cache takes no more walks.
func (c *walkCache) full() bool { return c.table.Full() }

func (c *walkCache) insert(h uint64, pcs []uintptr, site *Site) {
	// A walk another goroutine cached first keeps its entry.
	c.table.Insert(h, sameWalk(h, pcs), func(int) *walkEntry {
		return &walkEntry{hash: h, pcs: append([]uintptr(nil), pcs...), site: site}
	})
}

// site returns the site of the stack that called the function calling site,
// skipping skip more frames: site(0) from Record names Record's caller.
// Every function skip passes over must not be inlined.
//
//go:noinline
func (t *Tracker) site(skip int) *Site {
	if !t.cfg.framePointers {
		return t.callersSite(skip+1, nil, 0)
	}
	var walk [maxDepth]uintptr
	n, ok := fpstack.Walk(skip+2, walk[:])
	if !ok {
		if fpstack.Enabled() { // refused by a guard, not turned off by the operator
			t.stackFallbacks.Add(1)
		}
		return t.callersSite(skip+1, nil, 0)
	}
	if n == len(walk) {
		return t.deepSite(skip + 1) // maybe cut short: no key
	}
	site, keep, h := t.walkedSite(walk[:n])
	if site == nil {
		site = t.callersSite(skip+1, keep, h)
	}
	return site
}

// deepSite is site for a stack deeper than maxDepth physical frames. A walk
// cut at maxDepth holds fewer logical frames than runtime.Callers wherever
// it holds wrappers, so stacks that differ past it would share its key:
// the key is a walk twice as deep, trusted only where it names every frame
// runtime.Callers keeps (fpstack.Covers). Its own frame, kept out of site's,
// costs the shallow path nothing.
//
//go:noinline
func (t *Tracker) deepSite(skip int) *Site {
	var walk [2 * maxDepth]uintptr
	n, ok := fpstack.Walk(skip+2, walk[:])
	if !ok {
		t.stackFallbacks.Add(1)
		return t.callersSite(skip+1, nil, 0)
	}
	site, keep, h := t.walkedSite(walk[:n])
	if site == nil {
		site = t.callersSite(skip+1, keep, h)
	}
	return site
}

// walkedSite looks walk up in the walk cache: the site of a trusted walk,
// or nil and what callersSite is to cache, the walk and its hash when the
// walk is new and the cache has room (nil for one that disagreed once, or
// that a full cache cannot keep). site and deepSite share it; it captures
// nothing, so that the runtime.Callers of a miss, which they make, has no
// frame of it to skip.
func (t *Tracker) walkedSite(walk []uintptr) (site *Site, keep []uintptr, h uint64) {
	h = intern.NewHash().PCs(walk).Sum()
	switch e, _ := t.walks.table.Lookup(h, sameWalk(h, walk)); {
	case e == nil && t.walks.full():
		// The walk could not be kept, so comparing it would be wasted,
		// and counted again as a mismatch on every capture.
		t.stackUncached.Add(1)
		return nil, nil, 0
	case e == nil:
		return nil, walk, h
	case e.site == nil: // a walk that disagreed once is not trusted
		return nil, nil, 0
	default:
		return e.site, nil, 0
	}
}

// callersSite captures the stack with runtime.Callers, interns it, and, when
// walk is given, caches the walk for that site if the two agree.
//
//go:noinline
func (t *Tracker) callersSite(skip int, walk []uintptr, h uint64) *Site {
	var buf [maxDepth]uintptr
	n := runtime.Callers(skip+3, buf[:])
	site := t.stacks.intern(buf[:n])
	if walk != nil {
		// A copy, so that buf stays on the stack on the paths that
		// do not compare: comparing symbolizes, which escapes.
		t.cacheWalk(h, walk, append([]uintptr(nil), buf[:n]...), site)
	}
	return site
}

// cacheWalk keeps walk for site if it names every frame callers does, or as
// untrusted if not. It runs once per distinct walk.
func (t *Tracker) cacheWalk(h uint64, walk, callers []uintptr, site *Site) {
	if fpstack.Covers(walk, callers, maxDepth) {
		t.walks.insert(h, walk, site)
		return
	}
	t.stackMismatches.Add(1)
	t.walks.insert(h, walk, nil)
}
