package track

import (
	"sync"
	"weak"
)

// The part contract. The tracker is the hub of what was made with it: a
// pool, a direct DeviceAllocator, the adoptions on a device, a growth
// watcher, a mask cache, or a third party's allocator. Each is a Part: it
// attaches itself to the tracker it records into when it is made (Attach)
// and detaches when it closes (Detach), so that a summary, an out-of-memory
// error, a metrics bridge or a watcher's forecast finds it from the tracker
// alone, and nothing is passed twice. Part is the one interface a part
// implements to be counted: a third-party allocator that implements it is
// in every reading tensorlife makes, as a prometheus Collector is in every
// scrape.
//
// Readers read parts through Read alone (PartInfos for the figures every
// Part states), which calls each part under recover: the one place a
// part's panic is caught, counted (Totals.PartPanics), logged once per part
// and method (NotePanic), and turned into a *PanicError the reading lists
// while it goes on without that part. A reader that needs more than
// PartInfo reads it from the part's own type (a *pool.Pool's Stats) through
// the same seam.
//
// The tracker holds its parts weakly: a part needs no Close to leave (those
// with a Close or Stop detach there all the same). A part that is no longer
// reachable holds no memory a tensor could still use (every live tensor
// references its allocator), so dropping it from the books when the garbage
// collector takes it is right. track imports no package of its parts.

// Part is anything attached to a tracker: what it is, and the device
// memory it holds. PartInfo is called by readers (a summary, a metrics
// collection, an out-of-memory error, a window's forecast), outside the
// tracker's locks, concurrently with the part's own work, and must not
// block: it reads the part's counters (and at most its device's MemInfo).
type Part interface {
	PartInfo() PartInfo
}

// PartInfo is what a part says of itself at one moment.
type PartInfo struct {
	// Kind says what the part is, for reports and logs: "pool",
	// "allocator", "adoptions", "cache", "watcher".
	Kind string
	// Device is the device whose memory the part holds itself; "" for a
	// part that holds none of its own (a cache's blocks are its
	// allocator's, a watcher holds nothing).
	Device string
	// Reserved is the bytes the part holds on Device: tensorlife's memory
	// there (ReservedOn). Read as 0 when negative.
	Reserved int64
	// Budget is the bytes the part may hold at most, 0 for none.
	Budget int64
	// Left is the bytes the part may still take before an allocation
	// fails: with a budget, the budget less what it holds and has promised;
	// without, its device's free memory; -1 when unknown, or for a part
	// that allocates nothing. Read within [0, Budget] with a budget, and as
	// -1 when negative without one, so no reader shows a negative headroom.
	Left int64
}

// clamped returns info with the figures PartInfo documents: Reserved at
// least 0, Left within [0, Budget] with a budget, -1 or more without.
func (info PartInfo) clamped() PartInfo {
	info.Reserved = max(info.Reserved, 0)
	switch {
	case info.Budget > 0:
		info.Left = min(max(info.Left, 0), info.Budget)
	case info.Left < 0:
		info.Budget, info.Left = 0, -1
	default:
		info.Budget = 0
	}
	return info
}

// PartReading is one part's PartInfo, read through the seam (PartInfos).
type PartReading struct {
	Part Part // the part, for a reader that knows its type
	PartInfo
}

// partRegistry is a Tracker's list of attached parts. Attaching happens
// when a part is made and reading when a report, a metrics collection or an
// out-of-memory error needs it: neither is a hot path, so one mutex guards
// the list.
type partRegistry struct {
	mu   sync.Mutex
	list []part
}

// part is one attached part, held weakly. The registry holds parts of many
// types; each is a weakPart of its own type.
type part interface {
	// value returns the part, or nil once the collector has taken it.
	value() Part
	// same reports whether p is the weak pointer of the same part.
	same(p part) bool
}

// weakPart is a part of type *S.
type weakPart[S any, P interface {
	*S
	Part
}] struct{ p weak.Pointer[S] }

func (w weakPart[S, P]) value() Part {
	if s := w.p.Value(); s != nil {
		return P(s)
	}
	return nil // not a nil *S in an interface
}

func (w weakPart[S, P]) same(p part) bool {
	o, ok := p.(weakPart[S, P])
	return ok && o.p == w.p
}

// Attach adds part to t's parts, weakly, after those attached before it;
// attaching a part twice keeps its first place. Pools, DeviceAllocators,
// adoption books, watchers and mask caches attach themselves; a third
// party's allocator attaches itself the same way. A nil tracker (an
// untracked part) or a nil part attaches nothing.
func Attach[S any, P interface {
	*S
	Part
}](t *Tracker, part P) {
	if t == nil || part == nil {
		return
	}
	w := weakPart[S, P]{weak.Make((*S)(part))}
	r := &t.parts
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	for _, a := range r.list {
		if a.same(w) {
			return
		}
	}
	r.list = append(r.list, w)
}

// Detach removes part from t's parts: what a part's Close or Stop calls,
// so that a closed part leaves the reports at once. Detaching a part not
// attached, or with a nil tracker, does nothing.
func Detach[S any, P interface {
	*S
	Part
}](t *Tracker, part P) {
	if t == nil || part == nil {
		return
	}
	w := weakPart[S, P]{weak.Make((*S)(part))}
	r := &t.parts
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, a := range r.list {
		if a.same(w) {
			r.list = append(r.list[:i], r.list[i+1:]...)
			r.list = r.list[:len(r.list):len(r.list)]
			break
		}
	}
	r.pruneLocked()
}

// pruneLocked drops the parts that have been collected.
func (r *partRegistry) pruneLocked() {
	live := r.list[:0]
	for _, a := range r.list {
		if a.value() != nil {
			live = append(live, a)
		}
	}
	clear(r.list[len(live):])
	r.list = live
}

// attached returns the parts attached to t and still reachable, in the
// order they were attached.
func (t *Tracker) attached() []Part {
	r := &t.parts
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	out := make([]Part, 0, len(r.list))
	for _, a := range r.list {
		if p := a.value(); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// Read is the seam through which every reader reads a tracker's parts. It
// calls read(p) for each part attached to t that is a P (Part, a part's
// own type, or an interface a part may implement), in the order they were
// attached, outside t's locks, each call under recover: a call that panics
// is counted on t, logged once per part type and method (method names what
// read calls, for the log and the error), and returned among skipped as a
// *PanicError matching ErrPanic; the reading goes on with the next part.
// A runtime.Goexit in read ends the calling goroutine, as it would
// anywhere. A nil t (an untracked reader's) or a nil read reads nothing.
func Read[P any](t *Tracker, method string, read func(P)) (skipped []error) {
	if t == nil || read == nil {
		return nil
	}
	for _, a := range t.attached() {
		p, ok := a.(P)
		if !ok {
			continue
		}
		if err := Guard(t, a, method, func() { read(p) }); err != nil {
			skipped = append(skipped, err)
		}
	}
	return skipped
}

// PartInfos reads every part's PartInfo through the seam (Read), clamped as
// PartInfo documents, in the order the parts were attached; skipped lists
// the parts whose PartInfo panicked.
func (bk *Books) PartInfos() (parts []PartReading, skipped []error) {
	t := (*Tracker)(bk)
	skipped = Read(t, "PartInfo", func(p Part) {
		parts = append(parts, PartReading{Part: p, PartInfo: p.PartInfo().clamped()})
	})
	return parts, skipped
}
