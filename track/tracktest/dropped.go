package tracktest

import (
	"sync"

	"github.com/tensorlife/tensorlife/track"
)

// maxDropped bounds the tensors one watch keeps; the rest are only counted,
// so a test that drops handles in a loop cannot grow memory without bound.
const maxDropped = 1000

// dropLog keeps the tensors that the garbage collector finds dropped
// without Free while a scope or a check watches a tracker. A tracker that
// reclaims leaked tensors (track.ReclaimLeaks(true), the default) takes them
// out of its live set at once, so the live set alone cannot show them; the
// tracker reports each one to its watchers before it does, which makes the
// log exact.
type dropLog struct {
	scope scope // the tensors to keep: those made under its request, or all
	cfg   *config
	stopW func()

	mu      sync.Mutex
	stopped bool
	leaks   []Leak
	more    int
}

// watchDrops starts logging the tensors that tr finds dropped, within scope
// when it is not empty and less those c ignores. The caller must call stop.
func (c *config) watchDrops(tr *track.Tracker, scope scope) *dropLog {
	d := &dropLog{scope: scope, cfg: c}
	d.stopW = tr.WatchLeaks(d.add)
	return d
}

// add runs on the tracker's delivery goroutine for this watch, never on
// the runtime's: it filters and appends, holding the lock only for the
// append.
func (d *dropLog) add(r track.LeakReport) {
	if !d.scope.holds(&r.Allocation) {
		return
	}
	if d.cfg.ignored(&r.Allocation) {
		return
	}
	a := r.Allocation
	a.Leaked = true // what a report means, whenever the tracker flags it
	l := Leak{Allocation: a, State: Dropped, Holder: r.Holder}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.stopped:
	case len(d.leaks) < maxDropped:
		d.leaks = append(d.leaks, l)
	case r.Reclaimed:
		// Past the cap, only a tensor the tracker reclaims goes unlisted:
		// one it keeps stays live, flagged, and the check lists it from there.
		d.more++
	}
}

// stop ends the watch and returns the handles logged, one Leak each, and
// how many more were found beyond maxDropped. The tracker's stop waits
// until add has been given every report found before it: a tensor the
// tracker reclaimed before the check's last look was reported before it,
// so it is logged here; one found after is live at that look and is
// reported from there.
func (d *dropLog) stop() (leaks []Leak, more int) {
	d.stopW()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	return d.leaks, d.more
}
