package intern

import (
	"iter"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Limits fix a Table's size at construction.
type Limits struct {
	// Slots is the number of slots, rounded up to a power of two. Lookups
	// of keys that are not kept stay short while at most half of them
	// hold values.
	Slots int
	// Values bounds the values kept, at most Slots: an Insert past it is
	// refused. 0 keeps none.
	Values int
	// Probes bounds the slots a key is looked for in, from 1 to Slots. A
	// table that must keep exactly Values values whatever their hashes
	// passes Slots, and keeps Values at most half of Slots so that probes
	// stay short; one that may refuse a key whose neighbourhood is crowded
	// passes a few.
	Probes int
}

// Table maps keys to the values kept for them, at most Limits.Values of
// them. Values are stored as pointers and handed out shared: a kept value
// must not be modified except through its own synchronization (atomics).
// Lookups take no lock; Insert takes one when it keeps a value.
type Table[V any] struct {
	slots  []atomic.Pointer[V]
	mask   uint64
	probes uint64
	values int64

	count   atomic.Int64
	refused atomic.Int64
	mu      sync.Mutex // serializes keeping values
}

// New returns an empty table of the given limits, clamped to the ranges
// Limits documents.
func New[V any](l Limits) *Table[V] {
	slots := 1
	if l.Slots > 1 {
		slots = 1 << bits.Len(uint(l.Slots-1))
	}
	return &Table[V]{
		slots:  make([]atomic.Pointer[V], slots),
		mask:   uint64(slots - 1),
		probes: uint64(min(max(l.Probes, 1), slots)),
		values: int64(min(max(l.Values, 0), slots)),
	}
}

// Lookup returns the value kept under hash h that same accepts, looking in
// at most Limits.Probes slots; ok is false if there is none. same is called
// only with kept values and must not call the table. Lookup takes no lock
// and allocates nothing; it is small enough to be inlined, same with it.
// Call it where the key is, on a hot path: a method wrapped around it, with
// its comparison, is usually past the inliner's budget, and a call again.
func (t *Table[V]) Lookup(h uint64, same func(*V) bool) (v *V, ok bool) {
	for i := range t.probes {
		v := t.slots[(h+i)&t.mask].Load()
		if v == nil {
			break // keys are kept in the first free slot: none further on
		}
		if same(v) {
			return v, true
		}
	}
	return nil, false
}

// Insert returns the value kept under hash h that same accepts, keeping
// the one newValue returns if there is none. newValue runs under the
// table's lock, at most once, with the value's id: 0 for the first value
// the table keeps, then 1, 2, ... It must not call the table, and it
// should do little more than allocate: every Insert that keeps a value
// waits for it.
//
// When there is no room, because the table holds Limits.Values values or
// every slot the key may use holds another key, Insert calls nothing,
// returns ok=false and counts the refusal (Refused). A key that was
// refused for its crowded slots is refused again: slots are never freed.
func (t *Table[V]) Insert(h uint64, same func(*V) bool, newValue func(id int) *V) (v *V, ok bool) {
	// Without the lock first: the key may be kept already, and a table
	// that cannot keep it says so without making every caller wait.
	free := false
	for i := range t.probes {
		v := t.slots[(h+i)&t.mask].Load()
		if v == nil {
			free = true
			break
		}
		if same(v) {
			return v, true
		}
	}
	if !free || t.Full() {
		t.refused.Add(1)
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.probes {
		slot := &t.slots[(h+i)&t.mask]
		v := slot.Load()
		if v == nil {
			n := t.count.Load()
			if n >= t.values {
				break // filled by others since the look above
			}
			v = newValue(int(n))
			slot.Store(v)
			t.count.Store(n + 1)
			return v, true
		}
		if same(v) { // kept by another Insert since the look above
			return v, true
		}
	}
	t.refused.Add(1)
	return nil, false
}

// Len returns the number of values kept.
func (t *Table[V]) Len() int { return int(t.count.Load()) }

// Full reports whether the table holds Limits.Values values, so that every
// Insert of a new key is refused. A table that is not full may still refuse
// a key whose slots are all taken.
func (t *Table[V]) Full() bool { return t.count.Load() >= t.values }

// Refused counts the Inserts refused for want of room since New, one per
// call: a key refused twice counts twice.
func (t *Table[V]) Refused() int64 { return t.refused.Load() }

// All yields the values kept, in no particular order, without a lock: it
// yields a value kept while it runs or not.
func (t *Table[V]) All() iter.Seq[*V] {
	return func(yield func(*V) bool) {
		for i := range t.slots {
			if v := t.slots[i].Load(); v != nil && !yield(v) {
				return
			}
		}
	}
}
