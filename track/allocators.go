package track

import (
	"math"
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
	get  func() Reserver // nil once the allocator has been collected
}

// Reserver is what a tracker needs of an allocator that takes device memory:
// the device and the bytes it holds there.
type Reserver interface {
	Reserved() (device string, bytes int64)
}

// Attach adds src to tr's allocators, weakly: its reserved bytes count as
// tensorlife's on its device. Pools and DeviceAllocators attach themselves.
func Attach[S any, P interface {
	*S
	Reserver
}](tr *Tracker, src P) {
	if tr == nil || src == nil {
		return
	}
	wp := weak.Make((*S)(src))
	addr := uintptr(unsafe.Pointer(src))
	get := func() Reserver {
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

// Allocators returns the attached allocators still reachable.
func (t *Tracker) Allocators() []Reserver {
	return t.allocators.snapshot()
}

// snapshot returns the live allocators. They are asked for their figures
// by the caller, outside the lock: an allocator is foreign code.
func (r *allocatorRegistry) snapshot() []Reserver {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	srcs := make([]Reserver, 0, len(r.list))
	for _, a := range r.list {
		if s := a.get(); s != nil {
			srcs = append(srcs, s)
		}
	}
	return srcs
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

// Budgeted is an attached allocator with a memory budget (a pool made with
// one), found by type assertion on Allocators: a forecast of when a leak
// runs out of memory divides what it may still take by the leak's rate.
type Budgeted interface {
	Reserver
	// Headroom returns the budget in bytes (0: none) and the bytes the
	// allocator may still hand out before it refuses one.
	Headroom() (budget, left int64)
}
