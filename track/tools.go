package track

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// This file holds what allocators and tools read of a tracker beyond what
// programs use: what the parts hold, the copied counters an
// out-of-memory dump builds its profile from, the event history, the live
// figures by class, the site feed a watcher reads and the misuse log a test
// helper reads. The operations an allocator calls on the record path
// (Record, Release, Hold, ...) stand beside the registry they touch.

// ReservedOn returns what t's attached parts hold on device (PartInfo),
// saturating at math.MaxInt64: tensorlife's memory there. A part whose
// PartInfo panics is left out (Read).
func (t *Tracker) ReservedOn(device string) int64 {
	parts, _ := t.Books().PartInfos()
	var sum int64
	for _, p := range parts {
		if p.Device == device {
			sum = counter.AddSat(sum, p.Reserved) // a sum of huge claims never wraps
		}
	}
	return sum
}

// CopyCounts copies the counters the default profile's snapshot is read
// from and returns the function that builds that snapshot from the copy, as
// t.SnapshotOf(Filter{LabelKeys: []string{}}) would have returned it when
// CopyCounts ran: for a caller that must not wait for the snapshot itself,
// such as the allocation that just failed, whose dump needs the live set as
// it was then and builds it on another goroutine. CopyCounts costs O(sites
// × shapes + records held past their own handle), two allocations of about
// 80 bytes a site, no walk of the live set, and holds each shard's lock only
// to copy pointers. Each call of snapshot returns a snapshot of its own; it
// is safe for concurrent use.
func (bk *Books) CopyCounts() (snapshot func() *Snapshot) {
	t := (*Tracker)(bk)
	c := t.counts()
	return func() *Snapshot { return c.snapshot(Filter{LabelKeys: []string{}}) }
}

// HistoryLog is a copy of a tracker's event history (KeepHistory).
type HistoryLog struct {
	Start        time.Time // Event.Time counts from it: the tracker's start
	Events       []Event   // oldest first
	Dropped      int64     // overwritten events
	DroppedUntil int64     // the latest Time among them
	Capacity     int       // the events the history keeps at most
}

// ErrHistoryOff is History's error for a tracker made without KeepHistory.
var ErrHistoryOff = errors.New("track: event history is off (enable it with track.KeepHistory)")

// History returns a copy of t's event history, oldest first, or an error
// matching ErrHistoryOff when t keeps none.
func (t *Tracker) History() (*HistoryLog, error) {
	var events []Event
	dropped, until, capacity, ok := t.historyEach(
		func(n int) { events = make([]Event, 0, n) },
		func(e *Event) { events = append(events, *e) })
	if !ok {
		return nil, ErrHistoryOff
	}
	slices.SortFunc(events, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.ID, b.ID), cmp.Compare(a.Kind, b.Kind))
	})
	return &HistoryLog{Start: t.start, Events: events, Dropped: dropped, DroppedUntil: until, Capacity: capacity}, nil
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
func (bk *Books) LiveByClass() []ClassStats {
	t := (*Tracker)(bk)
	var out []ClassStats
	t.liveByClassEach(func(device, kind string, count, bytes int64) {
		out = append(out, ClassStats{Device: device, Kind: kind, LiveCount: count, LiveBytes: bytes})
	})
	return out
}

// A SiteFeed reports the sites of a tracker whose outlived figures changed,
// in time that grows with those alone: what a watcher reads at each window.
// For one goroutine at a time; Close it when done (a feed dropped without
// Close is closed by the collector).
type SiteFeed struct {
	feed *siteFeed
}

// NewSiteFeed returns a new feed of t's sites.
func (bk *Books) NewSiteFeed() *SiteFeed {
	t := (*Tracker)(bk)
	f := &SiteFeed{feed: t.siteFeedOf()}
	runtime.AddCleanup(f, (*siteFeed).close, f.feed)
	return f
}

// Changed appends to dst the sites changed since the last call (on the
// first, all that have allocated). A request's end function's end changes
// its sites at once; a labelled context's end is found as Totals says, and
// changes them then: a window may judge it that many windows late, never
// early (memory in flight is never counted outlived).
func (f *SiteFeed) Changed(dst []SiteStats) []SiteStats { return f.feed.changed(dst) }

// ChangedOwners appends to dst the owners whose figures changed since the
// last call (on the first, every owner listed in the tracker), those that
// hold nothing now included, with Count 0: O(owners that changed).
func (f *SiteFeed) ChangedOwners(dst []OwnerStats) []OwnerStats { return f.feed.changedOwners(dst) }

// Close stops the feed.
func (f *SiteFeed) Close() { f.feed.close() }

// Misuse is one double free or use after free of a record, with its lines:
// what an allocator notes (NoteMisuse) and a test helper lists
// (MisuseSince).
type Misuse struct {
	Kind           EventKind // EventDoubleFree or EventUseAfterFree
	Seq            uint64    // order among the tracker's misuses, from 1
	ID             uint64    // the record's id
	Bytes          int64
	Labels         Labels
	Allocated      *Site // nil when unknown
	FirstFree      *Site // nil when unknown
	SecondFree     *Site // of a double free
	Use            *Site // of a use after free
	FirstDeferred  bool  // the first Free ran from a defer statement
	SecondDeferred bool  // the second Free did
	req            *request
}

// MadeUnder reports whether m's allocation was made under ctx's request,
// or under a request begun within it.
func (m *Misuse) MadeUnder(ctx context.Context) bool { return madeUnder(m.req, ctx) }

// NoteMisuse records a misuse of the record r, m.Kind being EventDoubleFree
// or EventUseAfterFree: it is counted in t's totals (Totals.Misuse), kept in
// its history if kept, and listed by MisuseSince. NoteMisuse fills m's ID,
// Bytes, Labels, Allocated and Seq from r; other kinds, or a nil r, note
// nothing.
func (r *Record) NoteMisuse(m Misuse) {
	if r == nil || r.tracker == nil || m.Kind != EventDoubleFree && m.Kind != EventUseAfterFree {
		return
	}
	t := r.tracker
	m.ID, m.Bytes, m.Labels, m.Allocated, m.req = r.ID(), r.Bytes, r.Labels(), r.Site(), r.req
	site := m.SecondFree
	if m.Kind == EventUseAfterFree {
		site = m.Use
	}
	if site == nil {
		site = r.site
	}
	t.note(Event{Kind: m.Kind, ID: r.id, Bytes: r.Bytes, Site: site, Labels: m.Labels}, true)
	t.misuses.add(m)
}

// MisuseSince returns the misuses t noted after sequence number seq, the
// number lost past the bound of the latest 256, and the latest sequence
// number: a test helper's cursor.
func (bk *Books) MisuseSince(seq uint64) (ms []Misuse, lost, latest uint64) {
	t := (*Tracker)(bk)
	return t.misuses.since(seq)
}

// misuseLogSize bounds the misuses a tracker remembers for MisuseSince;
// older ones are counted, not kept.
const misuseLogSize = 256

// misuseLog keeps a tracker's latest misuses under its own lock: misuse
// is rare, and a test checks it once.
type misuseLog struct {
	mu   sync.Mutex
	seq  uint64
	ring *[misuseLogSize]Misuse // made at the first misuse
}

// add numbers m and keeps it, over the oldest past the bound.
func (l *misuseLog) add(m Misuse) {
	l.mu.Lock()
	if l.ring == nil {
		l.ring = new([misuseLogSize]Misuse)
	}
	l.seq++
	m.Seq = l.seq
	l.ring[l.seq%misuseLogSize] = m
	l.mu.Unlock()
}

// since returns the misuses noted after seq, how many of those are lost,
// and the latest seq.
func (l *misuseLog) since(seq uint64) (ms []Misuse, lost, latest uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	latest = l.seq
	first := seq + 1
	if latest >= misuseLogSize && first <= latest-misuseLogSize {
		lost = latest - misuseLogSize + 1 - first
		first = latest - misuseLogSize + 1
	}
	if l.ring == nil {
		return nil, 0, latest
	}
	for s := first; s <= latest; s++ {
		ms = append(ms, l.ring[s%misuseLogSize])
	}
	return ms, lost, latest
}

// A HandleFinder resolves a record of one tracker to the live handles of
// its tensor: package tensor's registry, which it keeps while retainer
// search is on (track/tracktest's Retainers option), so that a leaked
// record can be traced to the handles a heap dump must find. The handles
// come back as any: the search needs them only as heap objects.
type HandleFinder interface {
	// LiveHandles returns the handles of the record id that are neither
	// freed nor collected, as strong references: the caller pins them.
	LiveHandles(id uint64) []any
}

// FindHandlesWith makes f t's HandleFinder, unless t has one already or f
// is nil.
func (bk *Books) FindHandlesWith(f HandleFinder) {
	if f == nil {
		return
	}
	t := (*Tracker)(bk)
	t.handles.CompareAndSwap(nil, &f)
}

// LiveHandles returns what t's HandleFinder finds of the record id; nil
// when t has none (no handle was made while retainer search was on).
func (bk *Books) LiveHandles(id uint64) []any {
	t := (*Tracker)(bk)
	if f := t.handles.Load(); f != nil {
		return (*f).LiveHandles(id)
	}
	return nil
}
