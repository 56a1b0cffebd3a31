package track

import (
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// LeakReport is one handle the collector found dropped without Free.
type LeakReport struct {
	Allocation
	Holder    Holder // the dropped handle, at the line that made it
	Reclaimed bool   // its ownership is given up (ReclaimLeaks)
}

// ReportDropped reports a handle of r dropped without Free (nil site: its
// own; else Record.Hold's), no longer live; true: give its ownership up.
func (r *Record) ReportDropped(site *Site, how string) (reclaim bool) {
	if r == nil || r.tracker == nil || r.state() != stateLive {
		return true // nothing is kept for it: ownership goes
	}
	t := r.tracker
	if site == nil && r.word.Or(ownDropped)&ownDropped != 0 {
		return t.cfg.reclaimLeaks // the own handle has one finalizer: a second report is a caller's repeat
	}
	r.setLeaked()
	t.makeSpecial(r)
	holder := Holder{Site: r.site, How: howOwn, Dropped: 1}
	if site != nil {
		holder = Holder{Site: site, How: how, Dropped: 1}
	}
	r.markDropped(site, how)
	t.gcLeaks.Add(1)
	r.site.gcLeaks.Add(1)
	if t.cfg.historyEvents > 0 {
		ev := r.event(EventGCLeak, t.now())
		ev.Site = holder.Site
		t.remember(r.id, ev)
	}
	report := LeakReport{Allocation: r.allocation(), Holder: holder, Reclaimed: t.cfg.reclaimLeaks}
	t.callLeak(t.cfg.onLeak, report)
	if ws := t.leakWatchers.Load(); ws != nil {
		for _, w := range *ws {
			t.callLeak(w.f, report)
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

// WatchLeaks calls f, as OnLeak, for every leak found until stop.
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

// callLeak calls a leak callback (or the default, which calls the
// tracker's Logger), foreign code, for a report made on the runtime's
// finalizer or cleanup goroutine. That goroutine never runs it: a panic
// there would end the process, and a runtime.Goexit would end the
// runtime's goroutine, after which no finalizer or cleanup of the process
// runs again. So the callback runs on a goroutine of its own, which the
// report waits for, under recover: a panic is logged, a Goexit ends only
// that goroutine, and the leak's books are kept all the same. A callback
// that blocks still holds the report (OnLeak must not block).
func (t *Tracker) callLeak(f func(LeakReport), l LeakReport) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				defer func() { _ = recover() }() // nor a logger's panic
				t.cfg.logger.Error("tensorlife: a leak callback panicked; the leak is counted all the same",
					slog.String("tracker", t.cfg.name), slog.Uint64("id", l.ID), slog.String("panic", panicText(v)),
					slog.String("stack", string(debug.Stack())))
			}
		}()
		f(l)
	}()
	<-done
}
