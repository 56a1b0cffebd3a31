package track

import (
	"cmp"
	"slices"
	"time"
)

// Event is one entry of the history.
type Event struct {
	Kind              EventKind
	Time              int64 // nanoseconds since Tracker.Started
	ID                uint64
	Bytes             int64
	Site              *Site  // nil if unknown
	AllocKind, Device string // the allocation's kind and device, if any
	Labels            Labels
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

// snapshot appends the ring's events, oldest first.
func (r *ring) snapshot(dst []Event) []Event {
	if r.total < int64(len(r.events)) {
		return append(dst, r.events[:r.next]...)
	}
	dst = append(dst, r.events[r.next:]...)
	return append(dst, r.events[:r.next]...)
}

// HistoryLog is a copy of the event history.
type HistoryLog struct {
	Start                 time.Time // Event.Time counts from it
	Events                []Event   // oldest first
	Dropped, DroppedUntil int64     // overwritten events; the latest Time among them
	Capacity              int
}

// History returns a copy of the event history, oldest first.
func (t *Tracker) History() (*HistoryLog, error) {
	if t.cfg.historyEvents <= 0 {
		return nil, ErrHistoryOff
	}
	log := &HistoryLog{Start: t.start, Capacity: shardCount * ringSize(t.cfg.historyEvents)}
	// Size the copy first, so that no shard lock is held while a large
	// slice regrows.
	kept := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		kept += sh.history.kept()
		sh.mu.Unlock()
	}
	log.Events = make([]Event, 0, kept+kept/8)
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		log.Events = sh.history.snapshot(log.Events)
		log.Dropped += sh.history.dropped
		log.DroppedUntil = max(log.DroppedUntil, sh.history.droppedUntil)
		sh.mu.Unlock()
	}
	slices.SortFunc(log.Events, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Kind, b.Kind))
	})
	return log, nil
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
