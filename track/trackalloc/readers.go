package trackalloc

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/tensorlife/tensorlife/internal/hotpath"
	"github.com/tensorlife/tensorlife/track"
)

// Counts copies the counters the default profile's snapshot is read from
// and returns the function that builds that snapshot from the copy, as
// t.SnapshotOf(track.Filter{LabelKeys: []string{}}) would have returned it
// when Counts ran: for a caller that must not wait for the snapshot
// itself, such as the allocation that just failed, whose dump needs the
// live set as it was then and builds it on another goroutine. Counts costs
// O(sites × shapes + records held past their own handle), two allocations
// of about 80 bytes a site, no walk of the live set, and holds each shard's
// lock only to copy pointers. Each call of snapshot returns a snapshot of
// its own; it is safe for concurrent use.
func Counts(t *track.Tracker) (snapshot func() *track.Snapshot) {
	build := hotpath.Track.Counts(t)
	return func() *track.Snapshot {
		s, _ := build().(*track.Snapshot)
		return s
	}
}

// Event is one entry of a tracker's history (track.KeepHistory).
type Event struct {
	Kind      track.EventKind
	Time      int64 // nanoseconds since HistoryLog.Start, the tracker's start
	ID        uint64
	Bytes     int64
	Site      *track.Site // nil if unknown
	AllocKind string      // the allocation's kind, if any
	Device    string      // the allocation's device, if any
	Labels    track.Labels
}

// HistoryLog is a copy of a tracker's event history (track.KeepHistory).
type HistoryLog struct {
	Start        time.Time // Event.Time counts from it: the tracker's start
	Events       []Event   // oldest first
	Dropped      int64     // overwritten events
	DroppedUntil int64     // the latest Time among them
	Capacity     int       // the events the history keeps at most
}

// ErrHistoryOff is History's error for a tracker made without
// track.KeepHistory.
var ErrHistoryOff = errors.New("trackalloc: event history is off (enable it with track.KeepHistory)")

// History returns a copy of t's event history, oldest first, or an error
// matching ErrHistoryOff when t keeps none.
func History(t *track.Tracker) (*HistoryLog, error) {
	var events []Event
	start, dropped, until, capacity, ok := hotpath.Track.History(t,
		func(n int) { events = make([]Event, 0, n) },
		func(e hotpath.Event) {
			ev := Event{Time: e.Time, ID: e.ID, Bytes: e.Bytes, AllocKind: e.AllocKind, Device: e.Device}
			ev.Kind, _ = e.Kind.(track.EventKind)
			ev.Site, _ = e.Site.(*track.Site)
			ev.Labels, _ = e.Labels.(track.Labels)
			events = append(events, ev)
		})
	if !ok {
		return nil, ErrHistoryOff
	}
	slices.SortFunc(events, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Kind, b.Kind))
	})
	return &HistoryLog{Start: start, Events: events, Dropped: dropped, DroppedUntil: until, Capacity: capacity}, nil
}

// ClassStats are the live figures of one device and kind.
type ClassStats struct {
	Device    string
	Kind      string
	LiveCount int64
	LiveBytes int64
}

// LiveByClass returns the live figures of each device and kind that holds
// live tensors, by device then kind, from counters: O(classes). Past 63
// classes the rest count as kind "tensorlife.other".
func LiveByClass(t *track.Tracker) []ClassStats {
	var out []ClassStats
	hotpath.Track.LiveByClass(t, func(device, kind string, count, bytes int64) {
		out = append(out, ClassStats{Device: device, Kind: kind, LiveCount: count, LiveBytes: bytes})
	})
	return out
}

// Now returns the time on t's clock (track.Clock; time.Now by default):
// what a part that times its own work against the tracker's reads, so that
// a test or a demo that fakes the tracker's time fakes it everywhere.
func Now(t *track.Tracker) time.Time { return hotpath.Track.Now(t) }

// ReservedOn returns what t's attached allocators (Allocators) hold on
// device, saturating at math.MaxInt64: tensorlife's memory there.
func ReservedOn(t *track.Tracker, device string) int64 {
	var sum int64
	for _, a := range Allocators(t) {
		if d, bytes := a.Reserved(); d == device && bytes > 0 {
			if bytes > math.MaxInt64-sum {
				return math.MaxInt64 // a sum of huge claims never wraps
			}
			sum += bytes
		}
	}
	return sum
}
