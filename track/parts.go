package track

import (
	"sync"
	"weak"
)

// The tracker is the hub of what was made with it. A pool, a direct
// DeviceAllocator, the adoptions on a device, a growth watcher and a mask
// cache attach themselves to the tracker they record into (Attach), so that
// a summary, an out-of-memory dump, a metrics bridge or a pool's own
// out-of-memory report finds them from the tracker alone (PartsOf), and
// nothing is passed twice.
//
// The tracker holds its parts weakly: a part needs no Close to leave (those
// with a Close or Stop detach there all the same). A part that is no longer
// reachable holds no memory a tensor could still use (every live tensor
// references its allocator), so dropping it from the books when the garbage
// collector takes it is right. track imports no package of its parts: a
// reader names the small interface it needs (Reserver, Headroomer, or one
// of its own, as report's PoolSource), and PartsOf returns the parts that
// implement it.

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
	value() any
	// same reports whether p is the weak pointer of the same part.
	same(p part) bool
}

// weakPart is a part of type *S.
type weakPart[S any] struct{ p weak.Pointer[S] }

func (w weakPart[S]) value() any {
	if s := w.p.Value(); s != nil {
		return s
	}
	return nil // not a nil *S in an interface
}

func (w weakPart[S]) same(p part) bool {
	o, ok := p.(weakPart[S])
	return ok && o.p == w.p
}

// Attach adds part to t's parts, weakly, after those attached before it;
// attaching a part twice keeps its first place. Pools, DeviceAllocators,
// adoption books, watchers and mask caches attach themselves, so that a
// summary, a dump or a metrics bridge finds them from the tracker alone.
// A nil tracker (an untracked part) or a nil part attaches nothing.
func Attach[S any](t *Tracker, part *S) {
	if t == nil || part == nil {
		return
	}
	w := weakPart[S]{weak.Make(part)}
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
func Detach[S any](t *Tracker, part *S) {
	if t == nil || part == nil {
		return
	}
	w := weakPart[S]{weak.Make(part)}
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

// PartsOf returns the parts attached to t, still reachable, that implement
// I, in the order they were attached: how a reader finds the parts whose
// figures it reads (PartsOf[Reserver], or an interface of the reader's
// own). Each part is foreign code to t, asked for its figures by the
// caller, outside t's locks.
func PartsOf[I any](t *Tracker) []I {
	r := &t.parts
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	var out []I
	for _, a := range r.list {
		if p, ok := a.value().(I); ok {
			out = append(out, p)
		}
	}
	return out
}

// A Local is state of type T that a package keeps per tracker (a cursor, a
// set of books), made on first use and dropped with the tracker: so that no
// process-wide table is keyed by trackers. Declare one per kind of state,
// at package level:
//
//	var books = track.NewLocal(func() *adoptionBooks { return new(adoptionBooks) })
//
// and read it with books.Of(tr). A Local is safe for concurrent use.
type Local[T any] struct {
	index int
	mk    func() *T
}

// locals holds a tracker's Local values, by Local index. A value is made
// outside the lock (a maker may itself read a Local of the same tracker),
// and the first one stored wins.
type locals struct {
	mu     sync.Mutex
	values []any // each the *T of the Local with its index
}

// localCount numbers the Locals of the process.
var localCount struct {
	mu sync.Mutex
	n  int
}

// NewLocal returns a Local whose value in a tracker is made by mk, once per
// tracker (a second value made by a race is dropped unused).
func NewLocal[T any](mk func() *T) *Local[T] {
	localCount.mu.Lock()
	defer localCount.mu.Unlock()
	l := &Local[T]{index: localCount.n, mk: mk}
	localCount.n++
	return l
}

// Of returns l's value in t, making it on first use.
func (l *Local[T]) Of(t *Tracker) *T {
	s := &t.locals
	s.mu.Lock()
	if l.index < len(s.values) && s.values[l.index] != nil {
		v := s.values[l.index].(*T) // the slot of l holds only *T
		s.mu.Unlock()
		return v
	}
	s.mu.Unlock()
	v := l.mk() // without the lock: mk may read another Local of t
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.index >= len(s.values) {
		s.values = append(s.values, make([]any, l.index+1-len(s.values))...)
	}
	if s.values[l.index] == nil {
		s.values[l.index] = v
	}
	return s.values[l.index].(*T)
}
