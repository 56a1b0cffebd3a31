package track

// EventKind names something that happened to memory other than an ordinary
// allocation or free. Events are counted per kind (Totals.Events).
type EventKind uint8

const (
	// EventDoubleFree: a tensor handle was freed twice.
	EventDoubleFree EventKind = iota
	// EventOOM: an allocation failed for lack of memory.
	EventOOM
	// EventMaskRebuilt: a mask was built again where it should have grown.
	EventMaskRebuilt
	// EventLeakSuspect: the growth watcher flagged a site.
	EventLeakSuspect
	numEventKinds
)

var eventNames = [numEventKinds]string{"double_free", "oom", "mask_rebuilt", "leak_suspect"}

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

// Note counts an event of kind k at site (nil if unknown) involving bytes.
// A double free is also counted as misuse.
func (t *Tracker) Note(k EventKind, site *Site, bytes int64) {
	if k >= numEventKinds {
		return
	}
	t.events[k].Add(1)
	if k == EventDoubleFree {
		t.misuse.Add(1)
	}
}
