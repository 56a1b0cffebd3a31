package track

import "context"

// EventKind names something that happened to memory.
type EventKind uint8

const (
	EventAlloc          EventKind = iota // an allocation was recorded
	EventFree                            // an allocation was released
	EventGCLeak                          // the collector found a tensor dropped without Free
	EventDoubleFree                      // a handle was freed twice
	EventOOM                             // an allocation failed for lack of memory
	EventMaskRebuilt                     // a mask was built again where it should have grown
	EventLeakSuspect                     // a growth watcher flagged a site
	EventUseAfterFree                    // a freed handle was used
	EventOwnerOverBound                  // a growth watcher found an owner holding more than its bound
	numEventKinds
)

var eventNames = [numEventKinds]string{"alloc", "free", "gc_leak", "double_free", "oom", "mask_rebuilt", "leak_suspect", "use_after_free", "owner_over_bound"}

// String returns the event's name, as metrics and reports use it.
func (k EventKind) String() string {
	if k >= numEventKinds {
		return "unknown"
	}
	return eventNames[k]
}

// Note counts an event the registry cannot see, at site (nil if unknown).
func (bk *Books) Note(k EventKind, site *Site, bytes int64) {
	t := (*Tracker)(bk)
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

// madeUnder reports whether the request req (a record's, nil if none) is
// ctx's request or was begun within it.
func madeUnder(req *request, ctx context.Context) bool {
	anc := scopeOf(ctx).req
	return anc != nil && req.within(anc)
}
