package track

import (
	"cmp"
	"slices"
	"time"
)

// event is one entry of a tracker's history (KeepHistory), as
// trackalloc.Event shows it.
type event struct {
	Kind      EventKind
	Time      int64 // nanoseconds since the tracker started
	ID        uint64
	Bytes     int64
	Site      *Site  // nil if unknown
	AllocKind string // the allocation's kind, if any
	Device    string // the allocation's device, if any
	Labels    Labels
}

// ring is one shard's part of the history. Guarded by the shard's mutex.
type ring struct {
	events       []event
	next         int   // where the next event goes
	total        int64 // events ever added
	dropped      int64 // events overwritten
	droppedUntil int64 // the latest Time of an overwritten event
}

func (r *ring) add(e event) {
	if len(r.events) == 0 {
		return
	}
	if r.total >= int64(len(r.events)) {
		r.dropped++
		r.droppedUntil = max(r.droppedUntil, r.events[r.next].Time)
	}
	r.events[r.next] = e
	r.next++
	if r.next == len(r.events) {
		r.next = 0
	}
	r.total++
}

// kept returns how many events the ring holds.
func (r *ring) kept() int { return int(min(r.total, int64(len(r.events)))) }

// snapshot appends the ring's events, oldest first.
func (r *ring) snapshot(dst []event) []event {
	if r.total < int64(len(r.events)) {
		return append(dst, r.events[:r.next]...)
	}
	dst = append(dst, r.events[r.next:]...)
	return append(dst, r.events[:r.next]...)
}

// history copies the event history, oldest first, with the count of
// events overwritten, the latest Time among them and the rings' capacity
// (trackalloc.History).
func (t *Tracker) history() (events []event, dropped, droppedUntil int64, capacity int, err error) {
	if t.cfg.historyEvents <= 0 {
		return nil, 0, 0, 0, ErrHistoryOff
	}
	// Size the copy first, so that no shard lock is held while a large
	// slice regrows.
	kept := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		kept += sh.history.kept()
		sh.mu.Unlock()
	}
	events = make([]event, 0, kept+kept/8)
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		events = sh.history.snapshot(events)
		dropped += sh.history.dropped
		droppedUntil = max(droppedUntil, sh.history.droppedUntil)
		sh.mu.Unlock()
	}
	slices.SortFunc(events, func(a, b event) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Kind, b.Kind))
	})
	return events, dropped, droppedUntil, shardCount * ringSize(t.cfg.historyEvents), nil
}

func ringSize(total int) int { return max(16, (total+shardCount-1)/shardCount) }

// now returns nanoseconds since the tracker started, monotonic. The
// default clock costs a branch more than time.Since: no indirect call on
// the record path unless Clock asked for one.
func (t *Tracker) now() int64 {
	if c := t.cfg.clock; c != nil {
		return int64(c().Sub(t.start))
	}
	return int64(time.Since(t.start))
}

// wallNow is the time on the tracker's clock.
func (t *Tracker) wallNow() time.Time {
	if c := t.cfg.clock; c != nil {
		return c()
	}
	return time.Now()
}
