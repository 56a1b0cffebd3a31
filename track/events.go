package track

import "context"

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
func (t *Tracker) noteKind(k EventKind, site *Site, bytes int64) {
	if k >= numEventKinds || k <= EventGCLeak {
		return
	}
	t.note(event{Kind: k, Bytes: bytes, Site: site}, k == EventDoubleFree)
}

// note counts e by its kind, and as misuse if misuse is set, and with
// History on records it, timed now: what Note and NoteMisuse share.
func (t *Tracker) note(e event, misuse bool) {
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
func (t *Tracker) remember(i uint64, e event) {
	sh := &t.shards[i%shardCount]
	sh.mu.Lock()
	sh.history.add(e)
	sh.mu.Unlock()
}

// noteMisuse counts a double free or use after free of r, at site (the
// second free or the use; r's own site if nil), and keeps it in the
// history if kept. The misuse itself is trackalloc's to list.
func (t *Tracker) noteMisuse(r *Record, k EventKind, site *Site) {
	if k != EventDoubleFree && k != EventUseAfterFree || r == nil {
		return
	}
	if site == nil {
		site = r.site
	}
	t.note(event{Kind: k, ID: r.id, Bytes: r.Bytes, Site: site, Labels: r.Labels()}, true)
}

// madeUnder reports whether the request req (a record's, nil if none) is
// ctx's request or was begun within it.
func madeUnder(req *request, ctx context.Context) bool {
	anc := scopeOf(ctx).req
	return anc != nil && req.within(anc)
}
