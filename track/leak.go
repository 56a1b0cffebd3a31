package track

import (
	"sync"
	"sync/atomic"
)

// LeakReport describes a handle that the garbage collector found
// unreachable while its allocation was still live: it was dropped without
// Free. Each dropped handle is reported on its own, at the line that made
// it (Holder): three dropped Retain handles of one tensor are three reports.
type LeakReport struct {
	Allocation
	// Holder is the dropped handle: the allocation's own (How howOwn, at
	// the allocation's site) or an extra owner, at the line that made it.
	Holder Holder
	// Reclaimed reports whether the handle's ownership is being given up
	// (the tracker's ReclaimLeaks option): the memory returns when no
	// other handle holds it.
	Reclaimed bool
}

// ReportDropped reports one handle of r found dropped without Free: the
// allocation's own handle when site is nil, else the extra holder counted
// by Record.Hold(site, how). It is counted (Totals.GCLeaks counts handles),
// reported through the OnLeak callback with the handle's line, and r is
// flagged in snapshots. The owner of r (package tensor) calls it from the
// handle's finalizer, then, when it returns true (the ReclaimLeaks
// option), gives the handle's ownership up (Unhold, and Release with the
// last owner); otherwise the handle is kept, counted as dropped. Records
// not live in t, and a second report of a record's own handle, are not
// reported again.
func (t *Tracker) ReportDropped(r *Record, site *Site, how string) (reclaim bool) {
	if r == nil || r.tracker != t || r.state() != stateLive {
		return true // nothing is kept for it: ownership goes
	}
	if site == nil && r.word.Or(ownDropped)&ownDropped != 0 {
		return t.cfg.reclaimLeaks // the own handle has one finalizer: a second report is a caller's repeat
	}
	r.setLeaked()
	holder := Holder{Site: r.site, How: howOwn, Dropped: 1}
	if site != nil {
		holder = Holder{Site: site, How: how, Dropped: 1}
	}
	if !t.cfg.reclaimLeaks {
		r.markDropped(site, how)
	}
	t.gcLeaks.Add(1)
	r.site.gcLeaks.Add(1)
	if t.cfg.historyEvents > 0 {
		ev := r.event(EventGCLeak, t.now())
		ev.Site = holder.Site
		t.remember(r.id, ev)
	}
	report := LeakReport{Allocation: r.allocation(), Holder: holder, Reclaimed: t.cfg.reclaimLeaks}
	t.cfg.onLeak(report)
	if ws := t.leakWatchers.Load(); ws != nil {
		for _, w := range *ws {
			w.f(report)
		}
	}
	return t.cfg.reclaimLeaks
}

// leakWatcher is one WatchLeaks subscription.
type leakWatcher struct {
	f func(LeakReport)
}

// watchers is the tracker's subscription list: copied on write under mu and
// read without a lock by ReportLeak.
type watchers struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*leakWatcher]
}

// WatchLeaks calls f, in addition to the OnLeak callback, for every leak the
// garbage collector finds from now until stop is called. Like OnLeak, f runs
// on the runtime's cleanup goroutine and must not block. Test helpers use
// it to see tensors dropped and reclaimed before their check runs. stop may
// be called more than once.
func (t *Tracker) WatchLeaks(f func(LeakReport)) (stop func()) {
	if f == nil {
		return func() {}
	}
	w := &leakWatcher{f: f}
	t.leakWatchers.update(func(list []*leakWatcher) []*leakWatcher { return append(list, w) })
	var once sync.Once
	return func() {
		once.Do(func() {
			t.leakWatchers.update(func(list []*leakWatcher) []*leakWatcher {
				out := make([]*leakWatcher, 0, len(list))
				for _, x := range list {
					if x != w {
						out = append(out, x)
					}
				}
				return out
			})
		})
	}
}

func (ws *watchers) update(f func([]*leakWatcher) []*leakWatcher) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var cur []*leakWatcher
	if p := ws.list.Load(); p != nil {
		cur = *p
	}
	next := f(append([]*leakWatcher(nil), cur...))
	ws.list.Store(&next)
}

// Load returns the current subscriptions; nil if there never were any.
func (ws *watchers) Load() *[]*leakWatcher { return ws.list.Load() }
