package tracktest

import (
	"runtime"
	"time"

	"github.com/tensorlife/tensorlife/track"
)

// Find checks tr (nil means track.Default()) for live tensors, settling
// first as VerifyNone does, and returns nil when none is left. Otherwise it
// returns a *LeakError (matching ErrLeaked) that lists them, or an error
// matching ErrInvalidOption for a bad option. It is VerifyNone for code that
// is not a test: a service's shutdown path, a command's self-check.
func Find(tr *track.Tracker, opts ...Option) error {
	cfg, err := newConfig(entryFind, opts)
	if err != nil {
		return err
	}
	if le := cfg.check(tracker(tr), ""); le != nil {
		return le
	}
	return nil
}

func tracker(tr *track.Tracker) *track.Tracker {
	if tr == nil {
		return track.Default()
	}
	return tr
}

// observed is what a check learned about one allocation over its attempts.
type observed struct {
	alloc track.Allocation
	// flaggedLate: the first look saw the tensor unflagged, a later one saw
	// it flagged, so the site's leak counter rose for it during the check.
	flaggedLate bool
}

// check looks for live tensors in tr, within the scope when scope is not
// empty, and returns nil when none remains after settling.
//
// The first look costs one filtered snapshot; a clean test stops there. When
// tensors are live, the check runs the garbage collector and looks again
// with a doubling wait, until nothing is live, only tensors the collector
// already flagged are left (they never go away), or the retry and time
// budgets are spent. Every allocation seen on the way is remembered, so a
// tensor that the collector found dropped and reclaimed in between is
// reported although it left the live set: it is told apart from one freed
// in time by its site's leak counter, read before the first look and after
// the last.
func (c *config) check(tr *track.Tracker, scope string) *LeakError {
	filter := track.Filter{Allocations: true}
	if scope != "" {
		filter.Labels = map[string]string{ScopeLabel: scope}
	}
	// The site counters are read before the first look, so that they count
	// every tensor the collector reclaims from then on.
	baseline := siteGCLeaks(tr)
	seen := make(map[uint64]*observed)
	var live []track.Allocation
	var last time.Time
	sleep, slept := firstSleep, time.Duration(0)
	for attempt := 0; ; attempt++ {
		snap, _ := tr.SnapshotOf(filter) // the filter is valid: no MinAge
		last = snap.Time
		live = live[:0]
		allFlagged := true
		for i := range snap.Allocations {
			a := &snap.Allocations[i]
			if c.ignored(a) {
				continue
			}
			live = append(live, *a)
			allFlagged = allFlagged && a.Leaked
			if o := seen[a.ID]; o != nil {
				o.flaggedLate = o.flaggedLate || (a.Leaked && !o.alloc.Leaked)
				o.alloc = *a
			} else {
				seen[a.ID] = &observed{alloc: *a}
			}
		}
		if len(live) == 0 && attempt == 0 {
			return nil
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
	return collect(tr, scope, seen, live, baseline, last)
}

// collect turns what check saw into the report: every tensor still live,
// and every tensor that left the live set dropped without Free.
func collect(tr *track.Tracker, scope string, seen map[uint64]*observed,
	live []track.Allocation, baseline map[*track.Site]int64, at time.Time) *LeakError {
	le := &LeakError{Tracker: tr.Name(), Scope: scope, Checked: at}
	stillLive := make(map[uint64]bool, len(live))
	for _, a := range live {
		stillLive[a.ID] = true
		state := Live
		if a.Leaked {
			state = Dropped
		}
		le.add(a, state)
	}

	// Tensors that left the live set: flagged ones were dropped for sure;
	// the others were freed or dropped, as the site counters tell.
	gone := make(map[*track.Site][]*observed)
	for id, o := range seen {
		if stillLive[id] {
			continue
		}
		if o.alloc.Leaked {
			le.add(o.alloc, Dropped)
			continue
		}
		gone[o.alloc.Site] = append(gone[o.alloc.Site], o)
	}
	if len(gone) > 0 {
		after := siteGCLeaks(tr)
		counted := make(map[*track.Site]int64)
		for _, o := range seen {
			if o.flaggedLate {
				counted[o.alloc.Site]++
			}
		}
		for site, obs := range gone {
			// Tensors flagged during the check raised the counter already.
			found := after[site] - baseline[site] - counted[site]
			var state LeakState
			switch {
			case found <= 0:
				continue // freed in time
			case found >= int64(len(obs)):
				state = Dropped
			default:
				state = MaybeDropped
			}
			for _, o := range obs {
				le.add(o.alloc, state)
			}
		}
	}
	if len(le.Leaks) == 0 {
		return nil
	}
	le.sort()
	return le
}

// siteGCLeaks reads every site's count of tensors the garbage collector
// found without Free.
func siteGCLeaks(tr *track.Tracker) map[*track.Site]int64 {
	st := tr.SiteTotals()
	m := make(map[*track.Site]int64, len(st))
	for _, s := range st {
		m[s.Site] = s.GCLeaks
	}
	return m
}
