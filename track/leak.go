package track

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
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
// It runs on the runtime's cleanup or finalizer goroutine and never waits
// there for a leak callback: the leak's books (Totals.GCLeaks, the site's
// GCLeaks, the record's flag) change here, and the report is queued for
// each callback (see leakQueue).
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
	t.onLeak.push(report)
	if ws := t.leakWatchers.Load(); ws != nil {
		for _, w := range *ws {
			w.push(report)
		}
	}
	return t.cfg.reclaimLeaks
}

// Leak callbacks (OnLeak, WatchLeaks) are a caller's code, and a report is
// made on the runtime's cleanup or finalizer goroutine, which must never
// run it: a panic there would end the process, a runtime.Goexit would end
// the runtime's goroutine (no finalizer or cleanup of the process would run
// again), and a callback that blocks would stall every finalizer and
// cleanup of the process. So each callback has a queue of its own, drained
// in order by one goroutine of tensorlife's that exists only while reports
// wait: the runtime's goroutine only appends to it. A callback's panic is
// recovered, counted (Totals.PartPanics) and logged the first time; a
// Goexit ends only the drainer, and another starts if reports wait. A
// callback that blocks holds back its own reports only, never another
// callback's, another tracker's, or the collector: past maxQueuedLeaks
// reports waiting for it, a further report is not delivered to it, and is
// counted (Totals.LeakReportsLost) and logged once; the leak's books are
// exact either way. Books.WaitLeaks waits until the reports made so far
// are delivered, and a WatchLeaks stop until its own are.

// maxQueuedLeaks bounds the reports waiting for one callback: about 250
// bytes each, 1 MiB for a callback that never returns.
const maxQueuedLeaks = 4096

// leakQueue is one callback's reports, waiting to be delivered.
type leakQueue struct {
	t *Tracker
	f func(LeakReport)

	mu      sync.Mutex
	queue   []LeakReport // waiting, oldest first, from head
	head    int
	running bool   // a drainer is alive
	stopped bool   // no report is queued any more (WatchLeaks' stop)
	queued  uint64 // reports ever queued
	done    uint64 // of them, those delivered (returned, panicked or Goexited)
	// finished is broadcast when done moves, for waiters; its L is mu,
	// set at first use.
	finished    sync.Cond
	panicLogged bool
	lossLogged  bool
	logging     bool // the loss is being logged, off the runtime's goroutine
}

// push queues l for the callback and starts a drainer unless one runs. It
// never blocks on a callback: it takes q's lock only for the append.
func (q *leakQueue) push(l LeakReport) {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return
	}
	if q.waiting() >= maxQueuedLeaks {
		q.t.leaksLost.Add(1)
		first := !q.lossLogged
		q.lossLogged = true
		q.logging = q.logging || first
		q.mu.Unlock()
		if first {
			go q.logLoss() // the logger is a caller's code too: off the runtime's goroutine
		}
		return
	}
	q.queue = append(q.queue, l)
	q.queued++
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

// waiting returns the reports queued and not yet taken. The caller holds q.mu.
func (q *leakQueue) waiting() int { return len(q.queue) - q.head }

// pop takes the oldest report; false if none. The caller holds q.mu.
func (q *leakQueue) pop() (LeakReport, bool) {
	if q.waiting() == 0 {
		return LeakReport{}, false
	}
	l := q.queue[q.head]
	q.queue[q.head] = LeakReport{}
	q.head++
	if q.head == len(q.queue) {
		q.queue, q.head = q.queue[:0], 0
		if cap(q.queue) > 64 {
			q.queue = nil // a burst's backlog is not kept
		}
	}
	return l, true
}

// deliveredLocked counts one report delivered and wakes the waiters. The
// caller holds q.mu.
func (q *leakQueue) deliveredLocked() {
	q.done++
	if q.finished.L != nil {
		q.finished.Broadcast()
	}
}

// drain delivers the queued reports in order, then ends.
func (q *leakQueue) drain() {
	returned := false
	defer func() {
		if returned {
			return
		}
		// The callback called runtime.Goexit, which ended this goroutine
		// inside it: that report is delivered; another drainer takes the
		// rest.
		q.mu.Lock()
		q.deliveredLocked()
		start := q.waiting() > 0
		q.running = start
		q.mu.Unlock()
		if start {
			go q.drain()
		}
	}()
	q.mu.Lock()
	for {
		l, ok := q.pop()
		if !ok {
			q.running = false
			q.mu.Unlock()
			returned = true
			return
		}
		q.mu.Unlock()
		q.deliver(l)
		q.mu.Lock()
		q.deliveredLocked()
	}
}

// deliver calls the callback with l under recover: a panic is counted on
// the tracker and logged the first time this callback panics.
func (q *leakQueue) deliver(l LeakReport) {
	defer func() {
		if v := recover(); v != nil {
			q.t.panics.count.Add(1)
			q.mu.Lock()
			first := !q.panicLogged
			q.panicLogged = true
			q.mu.Unlock()
			if !first {
				return
			}
			defer func() { _ = recover() }() // nor a logger's panic
			q.t.cfg.logger.Error("tensorlife: a leak callback panicked; the leak is counted all the same, and its later panics only counted",
				slog.String("tracker", q.t.cfg.name), slog.Uint64("id", l.ID), slog.String("panic", panicText(v)),
				slog.String("stack", string(debug.Stack())))
		}
	}()
	q.f(l)
}

// stop queues no more reports, and returns how many were ever queued.
func (q *leakQueue) stop() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	return q.queued
}

// mark returns how many reports were ever queued: what wait waits for.
func (q *leakQueue) mark() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued
}

// wait blocks until the first n reports queued are delivered, and the
// loss, if any, is logged.
func (q *leakQueue) wait(n uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.finished.L == nil {
		q.finished.L = &q.mu
	}
	for q.done < n || q.logging {
		q.finished.Wait()
	}
}

// logLoss logs, once per callback, that reports are no longer given to it.
func (q *leakQueue) logLoss() {
	defer func() {
		q.mu.Lock()
		q.logging = false
		if q.finished.L != nil {
			q.finished.Broadcast()
		}
		q.mu.Unlock()
	}()
	defer func() { _ = recover() }() // a logger's panic is not let through
	t := q.t
	t.cfg.logger.Error("tensorlife: a leak callback has fallen behind: reports past those waiting for it are not given to it (Totals.LeakReportsLost); every leak is counted all the same",
		slog.String("tracker", t.cfg.name), slog.Int("waiting", maxQueuedLeaks))
}

// leakWatcher is one WatchLeaks subscription.
type leakWatcher struct {
	leakQueue
}

// watchers is the tracker's subscription list: copied on write under mu and
// read without a lock by ReportDropped.
type watchers struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*leakWatcher]
}

// WatchLeaks calls f, as OnLeak, for every leak found until stop: in
// order, on a goroutine of tensorlife's, never on the runtime's (a panic
// in f is recovered and logged, and an f that blocks holds back only its
// own reports; see OnLeak). stop ends the subscription and waits until f
// has returned from each report found before stop, so that what f
// gathered is complete once stop returns; called from a leak callback
// (f itself, or another), it does not wait, since f could not return
// while it did. Safe for concurrent use.
func (t *Tracker) WatchLeaks(f func(LeakReport)) (stop func()) {
	if f == nil {
		return func() {}
	}
	w := &leakWatcher{leakQueue{t: t, f: f}}
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
		n := w.stop()
		if !inLeakCallback() {
			w.wait(n)
		}
	}
}

// WaitLeaks blocks until every leak report made before the call has been
// delivered to the tracker's OnLeak callback and to each WatchLeaks
// subscription (or counted lost past the bound a callback that falls
// behind is held to). It is what a test or a tool waits on after a
// collection, instead of a clock: a leak's books change on the collector's
// goroutine, its callbacks run once delivered. A callback that never
// returns makes it wait forever; called from a leak callback it does not
// wait.
func (bk *Books) WaitLeaks() {
	t := (*Tracker)(bk)
	if inLeakCallback() {
		return
	}
	t.onLeak.wait(t.onLeak.mark())
	if ws := t.leakWatchers.Load(); ws != nil {
		for _, w := range *ws {
			w.wait(w.mark())
		}
	}
}

// drainFunction is the drainer's function as the runtime names it.
const drainFunction = "github.com/tensorlife/tensorlife/track.(*leakQueue).drain"

// inLeakCallback reports whether the calling goroutine is a drainer, one
// that runs leak callbacks: its stack's root is leakQueue.drain. Only the
// waits ask, off the record path.
func inLeakCallback() bool {
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(1, pcs)
		if n < len(pcs) {
			pcs = pcs[:n]
			break
		}
		pcs = make([]uintptr, 2*len(pcs))
	}
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Function == drainFunction || strings.HasPrefix(f.Function, drainFunction+".") {
			return true
		}
		if !more {
			return false
		}
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
