package track

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
	numEventKinds
)

var eventNames = [numEventKinds]string{"alloc", "free", "gc_leak", "double_free", "oom", "mask_rebuilt", "leak_suspect"}

// String returns the event's name, as used in metrics and reports.
func (k EventKind) String() string {
	if k >= numEventKinds {
		return "unknown"
	}
	return eventNames[k]
}

// EventKinds returns every event kind, in order.
func EventKinds() []EventKind {
	ks := make([]EventKind, numEventKinds)
	for i := range ks {
		ks[i] = EventKind(i)
	}
	return ks
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
	t.events[k].Add(1)
	if k == EventDoubleFree {
		t.misuse.Add(1)
	}
	if t.cfg.historyEvents > 0 {
		sh := &t.shards[t.noteShard.Add(1)%shardCount]
		sh.mu.Lock()
		sh.history.add(Event{Kind: k, Time: t.now(), Bytes: bytes, Site: site})
		sh.mu.Unlock()
	}
}
