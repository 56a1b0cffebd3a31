package tracktest

import (
	"errors"
	"runtime"
	"time"

	"github.com/tensorlife/tensorlife/track"
)

// Find checks tr (nil means track.Default()) for live tensors, settling
// first as VerifyNone does, and returns nil when none is left. Otherwise it
// returns a *LeakError (matching ErrLeaked) that lists them; a tensor
// freed twice since the last Find or VerifyNone of tr adds a *MisuseError
// (matching ErrMisuse; both joined when both are found); or an error
// matching ErrInvalidOption for a bad option. It is VerifyNone for code that
// is not a test: a service's shutdown path, a command's self-check.
func Find(tr *track.Tracker, opts ...Option) error {
	cfg, err := newConfig(entryFind, opts)
	if err != nil {
		return err
	}
	le, me := cfg.checkWatched(cfg.watch(tracker(tr), scope{}, false))
	switch {
	case le == nil && me == nil:
		return nil
	case me == nil:
		return le
	case le == nil:
		return me
	}
	return errors.Join(le, me)
}

// handleKey names the dropped handles of one tensor made at one line.
type handleKey struct {
	id   uint64
	site *track.Site
	how  string
}

// reportedID reports whether a dropped handle of tensor id is listed.
func reportedID(leaks map[handleKey]*Leak, id uint64) bool {
	for k := range leaks {
		if k.id == id {
			return true
		}
	}
	return false
}

func tracker(tr *track.Tracker) *track.Tracker {
	if tr == nil {
		return track.Default()
	}
	return tr
}

// watch is what a check follows from its start besides the live set: the
// tensors tr finds dropped without Free and tr's misuses, within scope when
// it is not empty.
type watch struct {
	tr     *track.Tracker
	scope  scope
	drops  *dropLog
	misuse *misuseWatch
}

// watch begins watching tr. now says the checked span begins here (a scope,
// the tests of TestMain); otherwise misuses are read from the last
// VerifyNone or Find of tr. The caller must end the watch with checkWatched,
// or stop w.drops.
func (c *config) watch(tr *track.Tracker, scope scope, now bool) *watch {
	misuse := c.watchMisuse(tr, scope, now)
	return &watch{tr: tr, scope: scope, drops: c.watchDrops(tr, scope), misuse: misuse}
}

// checkWatched ends w: it looks for leaked tensors, then for misuses since
// w began. Each result is nil when nothing was found.
func (c *config) checkWatched(w *watch) (*LeakError, *MisuseError) {
	le := c.check(w.tr, w.scope, w.drops)
	return le, w.misuse.check()
}

// check looks for leaked tensors in tr, within the scope when scope is not
// empty, and returns nil when none is left after settling. drops is the
// watch that began with the scope, the tests or the check; check stops it.
//
// The first look costs one filtered snapshot; a clean test stops there. When
// tensors are live, the check runs the garbage collector and looks again
// with a doubling wait, until nothing is live, only tensors the collector
// already flagged are left, or the retry and time budgets are spent. A
// tensor that leaves the live set in between was freed in time unless the
// collector found it dropped: then drops logged it, before the tracker
// reclaimed it, or a look saw it flagged.
func (c *config) check(tr *track.Tracker, scope scope, drops *dropLog) *LeakError {
	filter := track.Filter{Allocations: true}
	filter.Request = scope.ctx // nil: the whole tracker
	var snap *track.Snapshot
	var live []track.Allocation
	// found holds each leak once, by id: a tensor seen flagged is kept
	// although the tracker may reclaim it before the last look.
	found := make(map[uint64]track.Allocation)
	sleep, slept := firstSleep, time.Duration(0)
	for attempt := 0; ; attempt++ {
		snap, _ = tr.SnapshotOf(filter) // the filter is valid: no MinAge
		live = snap.Allocations[:0]
		allFlagged := true
		for _, a := range snap.Allocations {
			if c.ignored(&a) {
				continue
			}
			live = append(live, a)
			if a.Leaked {
				found[a.ID] = a
			}
			allFlagged = allFlagged && a.Leaked
		}
		if allFlagged || attempt >= c.retries {
			break
		}
		runtime.GC()
		wait := min(sleep, c.settle-slept)
		if wait > 0 {
			time.Sleep(wait)
			slept += wait
		} else {
			runtime.Gosched()
		}
		sleep *= 2
	}
	dropped, more := drops.stop()

	le := &LeakError{Tracker: tr.Name(), Scope: scope.name, Checked: snap.Time, MoreDropped: more,
		counted: make(map[uint64]struct{}, len(dropped)+len(live))}
	// A tensor some handle still holds is listed live, with its holders.
	// Its dropped handles are listed by the line that made them, one leak
	// per line: those the watch saw the collector find, and those the
	// records kept from before the watch (a record keeps its dropped
	// handles' lines until it is released), so that the report is the same
	// whenever the collector ran.
	droppedAt := make(map[handleKey]*Leak, len(dropped))
	var order []handleKey
	addDropped := func(a track.Allocation, h track.Holder, n int) {
		k := handleKey{a.ID, h.Site, h.How}
		l := droppedAt[k]
		if l == nil {
			l = &Leak{Allocation: a, State: Dropped, Holder: track.Holder{Site: h.Site, How: h.How}}
			droppedAt[k] = l
			order = append(order, k)
		}
		l.Holder.Dropped += n
	}
	for _, l := range dropped {
		addDropped(l.Allocation, l.Holder, 1)
	}
	reported := make(map[handleKey]int, len(droppedAt))
	for k, l := range droppedAt {
		reported[k] = l.Holder.Dropped
	}
	kept := func(a track.Allocation) {
		known := false
		for _, h := range a.Holders {
			if h.Dropped <= 0 {
				continue
			}
			known = true
			if n := h.Dropped - reported[handleKey{a.ID, h.Site, h.How}]; n > 0 {
				addDropped(a, h, n)
			}
		}
		if !known && !reportedID(droppedAt, a.ID) {
			addDropped(a, track.Holder{}, 1) // flagged, with no dropped handle known
		}
	}
	for _, a := range live {
		delete(found, a.ID)
		if liveHolders(&a) > 0 || !a.Leaked {
			le.add(a, Live)
		}
		if a.Leaked {
			kept(a)
		}
	}
	for _, a := range found {
		kept(a)
	}
	for _, k := range order {
		le.addLeak(*droppedAt[k])
	}
	le.counted = nil // the report is done: Bytes is final
	if len(le.Leaks) == 0 && more == 0 {
		return nil
	}
	le.sort()
	le.Open = stillOpen(tr, scope.name)
	if c.retainers {
		c.findRetainers(tr, le)
	}
	return le
}

// maxOpenListed is how many open requests a report lists.
const maxOpenListed = 5

// stillOpen returns the requests of tr still open when a check ended, the
// largest first: those of the scope checked (its ScopeLabel value), or all
// for a check of the whole tracker.
func stillOpen(tr *track.Tracker, scope string) []track.RequestStats {
	n := maxOpenListed
	if scope != "" {
		n = track.MaxOpenRows // the scope's among the tracker's
	}
	var out []track.RequestStats
	for _, r := range tr.OpenRequests(n).Largest {
		if v, _ := r.Labels.Get(ScopeLabel); scope == "" || v == scope {
			out = append(out, r)
		}
	}
	return out[:min(len(out), maxOpenListed)]
}
