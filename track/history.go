package track

import "time"

// Event is one entry of a tracker's history (KeepHistory, Tracker.History).
type Event struct {
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
	events       []Event
	next         int   // where the next event goes
	total        int64 // events ever added
	dropped      int64 // events overwritten
	droppedUntil int64 // the latest Time of an overwritten event
}

func (r *ring) add(e Event) {
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

// each calls f with the ring's events, oldest first.
func (r *ring) each(f func(e *Event)) {
	if r.total >= int64(len(r.events)) {
		for i := r.next; i < len(r.events); i++ {
			f(&r.events[i])
		}
	}
	for i := range r.next {
		f(&r.events[i])
	}
}

// historyEach copies the event history for History: grow learns how
// many events to expect, each sees every event, shard by shard (oldest
// first within a shard; the caller sorts), under the shard's lock, so it
// must only copy. It returns the count of events overwritten, the latest
// Time among them and the rings' capacity; false if t keeps no history.
func (t *Tracker) historyEach(grow func(n int), each func(e *Event)) (dropped, droppedUntil int64, capacity int, ok bool) {
	if t.cfg.historyEvents <= 0 {
		return 0, 0, 0, false
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
	grow(kept + kept/8)
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		sh.history.each(each)
		dropped += sh.history.dropped
		droppedUntil = max(droppedUntil, sh.history.droppedUntil)
		sh.mu.Unlock()
	}
	return dropped, droppedUntil, shardCount * ringSize(t.cfg.historyEvents), true
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
func (t *Tracker) Now() time.Time {
	if c := t.cfg.clock; c != nil {
		return c()
	}
	return time.Now()
}
