package track

import (
	"reflect"
	"sync"
	"unsafe"
	"weak"
)

// The allocator registry answers "how much of this device does tensorlife
// hold?" for the memory that is not tensorlife's (DeviceMemory.Outside) and
// for an out-of-memory report, which must know what the other allocators on
// its device hold. Every tensorlife allocator that records into a tracker
// (a pool, a direct DeviceAllocator, the adoptions on a device) attaches
// itself when it is made.
//
// The registry holds its allocators weakly: an allocator needs no Close to
// leave it. An allocator that is no longer reachable holds no memory a
// tensor could still use (every live tensor references its allocator), so
// dropping it from the books when the garbage collector takes it is right.

// allocatorRegistry is a Tracker's list of attached allocators. Attaching
// happens when an allocator is made and reading when a report, a metrics
// collection or an out-of-memory error needs it: neither is a hot path, so
// one mutex guards the list.
type allocatorRegistry struct {
	mu   sync.Mutex
	list []attached
}

// attached is one allocator: its address (to tell it apart from a
// Sources.Pools entry) and a weak way to reach it.
type attached struct {
	addr uintptr
	get  func() PoolSource // nil once the allocator has been collected
}

// Attach adds src to tr's allocators: its Stats().Reserved bytes count as
// memory tensorlife holds on its device (Tracker.ReservedOn,
// Sources.Read), in every report of tr. The tracker keeps src only
// weakly, so src needs no detaching: it leaves the books when it is garbage
// collected. Attaching the same allocator twice counts it once.
//
// *pool.Pool and *tensor.DeviceAllocator attach themselves when made with a
// tracker; call Attach for an allocator of your own that takes device
// memory and records its tensors in tr. A nil tr or src does nothing. Attach
// is safe for concurrent use.
func Attach[S any, P interface {
	*S
	PoolSource
}](tr *Tracker, src P) {
	if tr == nil || src == nil {
		return
	}
	wp := weak.Make((*S)(src))
	addr := uintptr(unsafe.Pointer(src))
	get := func() PoolSource {
		if s := wp.Value(); s != nil {
			return P(s)
		}
		return nil
	}
	r := &tr.allocators
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	for _, a := range r.list {
		if a.addr == addr {
			return
		}
	}
	r.list = append(r.list, attached{addr: addr, get: get})
}

// pruneLocked drops the allocators that have been collected.
func (r *allocatorRegistry) pruneLocked() {
	live := r.list[:0]
	for _, a := range r.list {
		if a.get() != nil {
			live = append(live, a)
		}
	}
	clear(r.list[len(live):])
	r.list = live
}

// Allocators returns the allocators attached to t that are still
// reachable, in the order they attached.
func (t *Tracker) Allocators() []PoolSource {
	srcs, _ := t.allocators.snapshot()
	return srcs
}

// snapshot returns the live allocators and their addresses. Their Stats are
// read by the caller, outside the lock: a source is foreign code.
func (r *allocatorRegistry) snapshot() ([]PoolSource, []uintptr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	srcs := make([]PoolSource, 0, len(r.list))
	addrs := make([]uintptr, 0, len(r.list))
	live := r.list[:0]
	for _, a := range r.list {
		if s := a.get(); s != nil {
			live = append(live, a)
			srcs = append(srcs, s)
			addrs = append(addrs, a.addr)
		}
	}
	clear(r.list[len(live):])
	r.list = live
	return srcs, addrs
}

// ReservedOn returns the bytes the allocators attached to t hold from the
// device named device: what tensorlife holds there. It reads each
// allocator's Stats, so it costs O(allocators); it is for reports and
// error paths, not for every allocation.
func (t *Tracker) ReservedOn(device string) int64 {
	var sum int64
	for _, s := range t.Allocators() {
		if st := s.Stats(); st.Device == device {
			sum += st.Reserved
		}
	}
	return sum
}

// addressOf returns the address a pointer-shaped source was attached under,
// and false for a source of another shape (which Attach cannot hold).
func addressOf(src PoolSource) (uintptr, bool) {
	v := reflect.ValueOf(src)
	if v.Kind() != reflect.Pointer {
		return 0, false
	}
	return v.Pointer(), true
}
