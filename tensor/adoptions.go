package tensor

import (
	"cmp"
	"slices"
	"sync"
)

// For devices and allocators that hold foreign memory (package
// tensor/foreign adopts it): the record a device keeps of its adoptions,
// and the interface of an allocator whose release must stay off the
// runtime's finalizer goroutine.

// An AdoptionKeeper is a Device that keeps its own record of the foreign
// memory adopted on it, so that tensor/foreign.Adopt refuses memory adopted
// twice and adoptions that add up to more than the device has. HostDevice
// and the CUDA device are AdoptionKeepers; a device that is not has its
// adoptions checked against nothing.
type AdoptionKeeper interface {
	Device
	// Adoptions returns the device's record; the same one at every call.
	Adoptions() *LiveAdoptions
}

// DroppedReleaser is an Allocator that releases memory whose last handle
// the garbage collector found dropped otherwise than memory freed: when
// that happens package tensor calls ReleaseDropped instead of Release, on
// its release queue's goroutine (never the runtime's finalizer goroutine),
// under recover. Nobody is left to hand an error to, so the allocator keeps
// what went wrong in figures of its own (tensor/foreign's adoptions count
// their failed releases).
type DroppedReleaser interface {
	Allocator
	ReleaseDropped(b Block)
}

// AdoptedSpan is the memory of one adoption: [Ptr, Ptr+Bytes).
type AdoptedSpan struct {
	Ptr   DevicePtr
	Bytes int64
}

// end returns the first address past s; address arithmetic wraps, so a
// range reaching past the address space ends at its top.
func (s AdoptedSpan) end() DevicePtr {
	e := s.Ptr + DevicePtr(s.Bytes)
	if e < s.Ptr {
		return ^DevicePtr(0)
	}
	return e
}

// LiveAdoptions are the ranges of a device's live adoptions (the foreign
// memory adopted on it and not yet released, in every tracker), sorted by first
// byte and never overlapping. A nil *LiveAdoptions (a device that keeps
// none) accepts every span and holds nothing. The zero value is ready; it
// must not be copied after first use. Safe for concurrent use.
type LiveAdoptions struct {
	mu    sync.Mutex
	spans []AdoptedSpan
	bytes int64 // the sum of the spans' bytes
}

// Add registers s on a device whose total memory is total, and reports ok.
// Otherwise it registers nothing and says why: clash is the live span s
// overlaps (Bytes > 0), or, with a zero clash, s is more than the total
// leaves beside the held bytes of the live adoptions. Inserting keeps the
// ranges sorted: O(log n) to find the place and a copy of the ranges after
// it, for n live adoptions on the device.
func (l *LiveAdoptions) Add(s AdoptedSpan, total int64) (clash AdoptedSpan, held int64, ok bool) {
	if l == nil {
		return AdoptedSpan{}, 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.spans, s.Ptr, func(x AdoptedSpan, p DevicePtr) int { return cmp.Compare(x.Ptr, p) })
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(l.spans) {
			continue
		}
		if o := l.spans[j]; o.Ptr < s.end() && s.Ptr < o.end() {
			return o, l.bytes, false
		}
	}
	if s.Bytes > total-l.bytes { // l.bytes <= total: no overflow
		return AdoptedSpan{}, l.bytes, false
	}
	l.spans = slices.Insert(l.spans, i, s)
	l.bytes += s.Bytes
	return AdoptedSpan{}, l.bytes, true
}

// Remove forgets the span at ptr; harmless if there is none or l is nil.
func (l *LiveAdoptions) Remove(ptr DevicePtr) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	i, found := slices.BinarySearchFunc(l.spans, ptr, func(x AdoptedSpan, p DevicePtr) int { return cmp.Compare(x.Ptr, p) })
	if found {
		l.bytes -= l.spans[i].Bytes
		l.spans = slices.Delete(l.spans, i, i+1)
	}
}

// Held returns the live adoptions' count and bytes.
func (l *LiveAdoptions) Held() (n int, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spans), l.bytes
}
