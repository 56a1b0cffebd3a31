package track

import (
	"math"
	"sync"
	"weak"
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
// implement (Reserver here; report and oteltrack ask for their own).

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

// Reserver is what a tracker needs of an allocator that takes device memory:
// the device and the bytes it holds there.
type Reserver interface {
	Reserved() (device string, bytes int64)
}

// Attach adds part to tr's parts, weakly, after those attached before it;
// attaching a part twice keeps its first place. Pools, DeviceAllocators,
// adoption books, watchers and mask caches attach themselves; a part that
// is a Reserver counts its reserved bytes as tensorlife's on its device.
// A nil tracker or part attaches nothing. Safe for concurrent use.
func Attach[S any, P interface{ *S }](tr *Tracker, part P) {
	if tr == nil || part == nil {
		return
	}
	wp := weak.Make((*S)(part))
	get := func() any {
		if s := wp.Value(); s != nil {
			return P(s)
		}
		return nil
	}
	r := &tr.parts
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	for _, a := range r.list {
		if a.key == any(wp) {
			return
		}
	}
	r.list = append(r.list, attached{key: wp, get: get})
}

// Detach removes part from tr's parts: what a part's Close or Stop calls, so
// that a closed part leaves the reports at once rather than at the next
// collection. Detaching a part not attached does nothing.
func Detach[S any, P interface{ *S }](tr *Tracker, part P) {
	if tr == nil || part == nil {
		return
	}
	key := any(weak.Make((*S)(part)))
	r := &tr.parts
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
func (t *Tracker) Parts() []any {
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

// Allocators returns the attached parts that are Reservers, in order.
func (t *Tracker) Allocators() []Reserver {
	var out []Reserver
	for _, p := range t.Parts() {
		if r, ok := p.(Reserver); ok {
			out = append(out, r)
		}
	}
	return out
}

// ReservedOn returns what the attached allocators hold on device.
func (t *Tracker) ReservedOn(device string) int64 {
	var sum int64
	for _, s := range t.Allocators() {
		if d, bytes := s.Reserved(); d == device && bytes > 0 {
			if bytes > math.MaxInt64-sum {
				return math.MaxInt64 // saturate: a sum of huge claims never wraps
			}
			sum += bytes
		}
	}
	return sum
}

// locals is what packages above track keep per tracker (Local).
type locals struct {
	mu sync.Mutex
	m  map[any]any
}

// Local returns what tr keeps under key, made by mk the first time and
// kept as long as tr: the state a package above track keeps per tracker
// (package tensor's adoption books, tracktest's misuse cursor) lives in
// the tracker and dies with it, rather than in a process-wide map keyed by
// trackers. key should be a value of an unexported type of the caller's,
// as with context.WithValue, so that no two packages share one. mk runs at
// most once per key, under a lock of tr's that nothing else takes while mk
// runs; it must not call Local on tr. Safe for concurrent use.
func Local[T any](tr *Tracker, key any, mk func() *T) *T {
	l := &tr.locals
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.m[key].(*T); ok {
		return v
	}
	if l.m == nil {
		l.m = make(map[any]any)
	}
	v := mk()
	l.m[key] = v
	return v
}

// Headroomer is an attached allocator that tells how much it may still
// take, found by type assertion on Allocators (a pool, a DeviceAllocator):
// a forecast of when a leak runs out of memory divides that by the leak's
// rate.
type Headroomer interface {
	Reserver
	// Headroom returns the allocator's budget in bytes (0: none) and the
	// bytes it may still take before an allocation fails: with a budget,
	// the budget less what its blocks hold; without, its device's free
	// memory, or -1 when the device cannot tell.
	Headroom() (budget, left int64)
}
