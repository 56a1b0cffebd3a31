package track

import (
	"context"
	"sync"
)

// EventKind names something that happened to memory. Allocations, frees and
// GC-found leaks are counted by the registry itself; the other kinds are
// counted when a package reports them with Note. Totals.Event reads any of
// them, and the event history (History) records all of them.
type EventKind uint8

const (
	// EventAlloc: an allocation was recorded.
	EventAlloc EventKind = iota
	// EventFree: an allocation was released.
	EventFree
	// EventGCLeak: the garbage collector found a tensor dropped without Free.
	EventGCLeak
	// EventDoubleFree: a tensor handle was freed twice.
	EventDoubleFree
	// EventOOM: an allocation failed for lack of memory.
	EventOOM
	// EventMaskRebuilt: a mask was built again where it should have grown.
	EventMaskRebuilt
	// EventLeakSuspect: the growth watcher flagged a site.
	EventLeakSuspect
	// EventUseAfterFree: an operation was attempted on a freed handle.
	EventUseAfterFree
	numEventKinds
)

var eventNames = [numEventKinds]string{"alloc", "free", "gc_leak", "double_free", "oom", "mask_rebuilt", "leak_suspect", "use_after_free"}

// String returns the event's name, as used in metrics and reports.
func (k EventKind) String() string {
	if k >= numEventKinds {
		return "unknown"
	}
	return eventNames[k]
}

// Note reports an event of kind k at site (nil if unknown) involving bytes:
// it is counted and, with History on, recorded. Packages call it for events
// the registry cannot see (OOM, mask rebuilt, leak suspect, double free);
// EventAlloc, EventFree and EventGCLeak are recorded by the tracker itself
// and ignored here. A double free is also counted as misuse.
func (t *Tracker) Note(k EventKind, site *Site, bytes int64) {
	if k >= numEventKinds || k <= EventGCLeak {
		return
	}
	t.note(Event{Kind: k, Bytes: bytes, Site: site}, k == EventDoubleFree)
}

// note counts e by its kind, and as misuse if misuse is set, and with
// History on records it, timed now: what Note and NoteMisuse share.
func (t *Tracker) note(e Event, misuse bool) {
	t.events[e.Kind].Add(1)
	if misuse {
		t.misuse.Add(1)
	}
	if t.cfg.historyEvents > 0 {
		e.Time = t.now()
		t.remember(uint64(t.noteShard.Add(1)), e)
	}
}

// remember keeps e in the event history, in the ring of shard i (modulo the
// shard count): a record's events go to its own shard, noted events are
// spread over all. Callers check that the history is on.
func (t *Tracker) remember(i uint64, e Event) {
	sh := &t.shards[i%shardCount]
	sh.mu.Lock()
	sh.history.add(e)
	sh.mu.Unlock()
}

// Misuse is one double free or use after free as the tensor layer saw it:
// the handle's allocation, where it was first freed and where it was freed
// again or used.
type Misuse struct {
	Kind       EventKind // EventDoubleFree or EventUseAfterFree
	Seq        uint64    // order among the tracker's misuses, from 1
	ID         uint64    // the allocation's record id
	Bytes      int64
	Labels     Labels // the allocation's labels
	Allocated  *Site  // nil when unknown
	FirstFree  *Site  // nil when unknown
	SecondFree *Site  // nil when unknown or not a double free
	Use        *Site  // the use of a freed handle; nil unless EventUseAfterFree
	req        *request
}

// MadeUnder reports whether the misused allocation was made under the
// request of ctx (WithRequest), as Allocation.MadeUnder does.
func (m *Misuse) MadeUnder(ctx context.Context) bool {
	req := scopeOf(ctx).req
	return req != nil && m.req == req
}

// misuseLogSize bounds the misuses a tracker remembers for MisuseSince;
// older ones are counted, not kept.
const misuseLogSize = 256

// misuseLog keeps the latest misuses under its own lock: misuse is rare,
// and a test checks it once.
type misuseLog struct {
	mu   sync.Mutex
	seq  uint64
	ring [misuseLogSize]Misuse
}

// NoteMisuse reports a double free or a use after free of r with its
// sites, as Note does (counted, as misuse too, and with History on
// recorded; the history event carries the second Free's or the use's site
// when known), and keeps it for MisuseSince, which package tracktest reads
// to fail a test in which it happened. The misuse's ID, Bytes, Labels and
// Allocated are r's.
func (t *Tracker) NoteMisuse(r *Record, m Misuse) {
	if m.Kind != EventDoubleFree && m.Kind != EventUseAfterFree || r == nil {
		return
	}
	m.ID, m.Bytes, m.Labels, m.Allocated, m.req = r.id, r.Bytes, r.Labels(), r.site, r.req
	site := m.SecondFree
	if m.Kind == EventUseAfterFree {
		site = m.Use
	}
	if site == nil {
		site = m.Allocated
	}
	t.note(Event{Kind: m.Kind, ID: m.ID, Bytes: m.Bytes, Site: site, Labels: m.Labels}, true)
	l := &t.misuses
	l.mu.Lock()
	l.seq++
	m.Seq = l.seq
	l.ring[l.seq%misuseLogSize] = m
	l.mu.Unlock()
}

// MisuseSince returns the misuses noted after seq (0: all that are kept),
// oldest first, how many of those were no longer kept, and the latest seq,
// to pass to the next call.
func (t *Tracker) MisuseSince(seq uint64) (ms []Misuse, lost, latest uint64) {
	l := &t.misuses
	l.mu.Lock()
	defer l.mu.Unlock()
	latest = l.seq
	first := seq + 1
	if latest >= misuseLogSize && first <= latest-misuseLogSize {
		lost = latest - misuseLogSize + 1 - first
		first = latest - misuseLogSize + 1
	}
	for s := first; s <= latest; s++ {
		ms = append(ms, l.ring[s%misuseLogSize])
	}
	return ms, lost, latest
}
