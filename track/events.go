package track

import (
	"context"
	"sync"
)

// EventKind names something that happened to memory.
type EventKind uint8

const (
	EventAlloc        EventKind = iota // an allocation was recorded
	EventFree                          // an allocation was released
	EventGCLeak                        // the collector found a tensor dropped without Free
	EventDoubleFree                    // a handle was freed twice
	EventOOM                           // an allocation failed for lack of memory
	EventMaskRebuilt                   // a mask was built again where it should have grown
	EventLeakSuspect                   // a growth watcher flagged a site
	EventUseAfterFree                  // a freed handle was used
	numEventKinds
)

var eventNames = [numEventKinds]string{"alloc", "free", "gc_leak", "double_free", "oom", "mask_rebuilt", "leak_suspect", "use_after_free"}

// String returns the event's name, as metrics and reports use it.
func (k EventKind) String() string {
	if k >= numEventKinds {
		return "unknown"
	}
	return eventNames[k]
}

// Note counts an event the registry cannot see, at site (nil if unknown).
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

// Misuse is one double free or use after free, with its lines.
type Misuse struct {
	Kind                          EventKind // EventDoubleFree or EventUseAfterFree
	Seq, ID                       uint64    // order among the tracker's misuses, from 1; the record's id
	Bytes                         int64
	Labels                        Labels
	Allocated, FirstFree          *Site // nil when unknown
	SecondFree, Use               *Site // of a double free, of a use after free
	FirstDeferred, SecondDeferred bool  // that Free ran from a defer statement
	req                           *request
}

// MadeUnder reports whether m's allocation was made under ctx's request.
func (m *Misuse) MadeUnder(ctx context.Context) bool {
	req := scopeOf(ctx).req
	return req != nil && m.req.within(req)
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

// NoteMisuse notes a double free or use after free of r, for MisuseSince.
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

// MisuseSince returns the misuses noted after seq, how many of those are
// lost, and the latest seq.
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
