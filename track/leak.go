package track

import (
	"sync"
	"sync/atomic"
)

// LeakReport describes a tensor that the garbage collector found unreachable
// while it was still live: it was dropped without Free.
type LeakReport struct {
	Allocation
	// Reclaimed reports whether the memory is being returned to its allocator
	// (the tracker's ReclaimLeaks option).
	Reclaimed bool
}

// ReportLeak marks r as leaked: counted, reported through the OnLeak callback,
// and flagged in snapshots. The owner of r (package tensor) calls it from a
// runtime cleanup once a handle is unreachable, then returns the memory and
// releases r if ReclaimLeaks is true. It reports each record once and
// returns whether this call reported it; records not live in t are ignored.
func (t *Tracker) ReportLeak(r *Record) bool {
	if r == nil || r.tracker != t || r.state.Load() != stateLive || r.leaked.Swap(true) {
		return false
	}
	t.gcLeaks.Add(1)
	r.site.gcLeaks.Add(1)
	if t.cfg.historyEvents > 0 {
		at := t.now()
		sh := &t.shards[r.id%shardCount]
		sh.mu.Lock()
		sh.history.add(r.event(EventGCLeak, at))
		sh.mu.Unlock()
	}
	report := LeakReport{Allocation: r.allocation(), Reclaimed: t.cfg.reclaimLeaks}
	t.cfg.onLeak(report)
	if ws := t.leakWatchers.Load(); ws != nil {
		for _, w := range *ws {
			w.f(report)
		}
	}
	return true
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
