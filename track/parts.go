package track

import (
	"sync"
)

// The tracker is the hub of what was made with it. A pool, a direct
// DeviceAllocator, the adoptions on a device, a growth watcher and a mask
// cache attach themselves to the tracker they record into, so that a
// summary, an out-of-memory dump, a metrics bridge or a pool's own
// out-of-memory report finds them from the tracker alone, and nothing is
// passed twice.
//
// The tracker holds its parts weakly: a part needs no Close to leave (those
// with a Close or Stop detach there all the same). A part that is no longer
// reachable holds no memory a tensor could still use (every live tensor
// references its allocator), so dropping it from the books when the garbage
// collector takes it is right. track imports no package of its parts: it
// knows them as values, and its readers by the small interfaces they
// implement (trackalloc.Reserver; report and oteltrack ask for their own).

// partRegistry is a Tracker's list of attached parts. Attaching happens
// when a part is made and reading when a report, a metrics collection or an
// out-of-memory error needs it: neither is a hot path, so one mutex guards
// the list.
type partRegistry struct {
	mu   sync.Mutex
	list []attached
}

// attached is one part: its weak pointer (comparable: two weak pointers of
// one part are equal, which tells a second Attach from a new part) and a
// way to reach it.
type attached struct {
	key any
	get func() any // nil once the part has been collected
}

// attachKey adds a part, known by its weak pointer key and reached by get,
// to t's parts after those attached before it; attaching a part twice keeps
// its first place (trackalloc.Attach).
func (t *Tracker) attachKey(key any, get func() any) {
	r := &t.parts
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	for _, a := range r.list {
		if a.key == key {
			return
		}
	}
	r.list = append(r.list, attached{key: key, get: get})
}

// detachKey removes the part of key from t's parts (trackalloc.Detach).
func (t *Tracker) detachKey(key any) {
	r := &t.parts
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = deleteKey(r.list, key)
	r.pruneLocked()
}

// deleteKey returns list without the entry of key, in order.
func deleteKey(list []attached, key any) []attached {
	for i, a := range list {
		if a.key == key {
			copy(list[i:], list[i+1:])
			list[len(list)-1] = attached{}
			return list[:len(list)-1]
		}
	}
	return list
}

// pruneLocked drops the parts that have been collected.
func (r *partRegistry) pruneLocked() {
	live := r.list[:0]
	for _, a := range r.list {
		if a.get() != nil {
			live = append(live, a)
		}
	}
	clear(r.list[len(live):])
	r.list = live
}

// Parts returns the parts attached to t and still reachable, in the order
// they were attached. Readers pick the ones they know by type or interface
// (a *pool.Pool, a *watch.Watcher, anything with Stats); each is foreign
// code to t, asked for its figures by the caller, outside t's locks.
func (t *Tracker) partList() []any {
	r := &t.parts
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	out := make([]any, 0, len(r.list))
	for _, a := range r.list {
		if p := a.get(); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// locals is what packages above track keep per tracker (Local).
type locals struct {
	mu sync.Mutex
	m  map[any]any
}

// localOf returns what a package above track keeps in t under key, made
// by mk on first use (trackalloc.Local).
func (t *Tracker) localOf(key any, mk func() any) any {
	l := &t.locals
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.m[key]; ok {
		return v
	}
	if l.m == nil {
		l.m = make(map[any]any)
	}
	v := mk()
	l.m[key] = v
	return v
}
