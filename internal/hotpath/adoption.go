package hotpath

// What package tensor lends tensor/foreign, the package that adopts memory
// allocated outside tensorlife: adoption is for the few who hold such
// memory, so tensor keeps its mechanism out of its API and foreign reaches
// it here. Three pieces:
//
//   - Tensor.Make, which tensor fills at init, makes a tensor from
//     foreign's own allocator with newTensor, so that an adopted tensor is
//     a tensor in every way and is recorded at the adopting line;
//   - DroppedReleaser, which tensor's finalizer path checks, so that a
//     dropped adopted tensor's foreign Release is queued rather than run on
//     the runtime's finalizer goroutine;
//   - LiveAdoptions, the live adoptions a device keeps (HostDevice embeds
//     it, and tensor/foreign lends it to other devices), so that no
//     process-wide table keyed by devices is needed.

import (
	"cmp"
	"context"
	"slices"
	"sync"
)

// TensorFuncs are package tensor's operations that tensor/foreign calls.
// The values are tensor's types passed as any, since this package cannot
// name them without an import cycle.
type TensorFuncs struct {
	// Make makes a tensor of spec (a tensor.Spec) from alloc (a
	// tensor.Allocator) and returns it (a *tensor.Tensor; nil with an
	// error). The tensor is recorded at the frame skip frames above Make's
	// caller, as tensor.New records at its caller: skip 1 is the caller of
	// the function that calls Make.
	Make func(ctx context.Context, alloc, spec any, skip int) (any, error)
}

// Tensor holds tensor's operations from its init on.
var Tensor TensorFuncs

// Dropped is the argument of QueueDropped: a type that only tensorlife can
// name, so that no program can write the interface and call it.
type Dropped struct{}

// DroppedReleaser is an allocator whose Release runs foreign code, which
// must never run on the runtime's finalizer goroutine: when the garbage
// collector finds such a tensor's last handle dropped, tensor calls
// QueueDropped instead of Release, and the allocator releases the memory
// on a goroutine of its own. QueueDropped must not block.
type DroppedReleaser interface {
	QueueDropped(Dropped)
}

// LiveAdoptions is what a device embeds to keep the foreign memory adopted
// on it and not yet released, in every tracker. It has no exported method
// or field, so that a device embedding it shows nothing of it; tensor/foreign
// finds it with AdoptedSpansOf. The zero value is ready; it must not be
// copied after first use.
type LiveAdoptions struct{ set AdoptedSpans }

// adoptedSpans is what makes a device that embeds LiveAdoptions an
// adoptionHolder: a method no other package can declare.
func (l *LiveAdoptions) adoptedSpans() *AdoptedSpans { return &l.set }

type adoptionHolder interface{ adoptedSpans() *AdoptedSpans }

// AdoptedSpansOf returns the live adoptions of dev, a tensor.Device; nil if
// dev embeds no LiveAdoptions.
func AdoptedSpansOf(dev any) *AdoptedSpans {
	if h, ok := dev.(adoptionHolder); ok {
		return h.adoptedSpans()
	}
	return nil
}

// Span is the memory of one adoption: [Ptr, Ptr+Bytes).
type Span struct {
	Ptr   uintptr
	Bytes int64
}

// end returns the first address past s; address arithmetic wraps, so a
// range reaching past the address space ends at its top.
func (s Span) end() uintptr {
	e := s.Ptr + uintptr(s.Bytes)
	if e < s.Ptr {
		return ^uintptr(0)
	}
	return e
}

// AdoptedSpans are the ranges of a device's live adoptions, sorted by first
// byte and never overlapping. A nil *AdoptedSpans (a device that keeps
// none) accepts every span and holds nothing. Safe for concurrent use.
type AdoptedSpans struct {
	mu    sync.Mutex
	spans []Span
	bytes int64 // the sum of the spans' bytes
}

// Add registers s on a device whose total memory is total, and reports ok.
// Otherwise it registers nothing and says why: clash is the live span s
// overlaps (Bytes > 0), or, with a zero clash, s is more than the total
// leaves beside the held bytes of the live adoptions. Inserting keeps the
// ranges sorted: O(log n) to find the place and a copy of the ranges after
// it, for n live adoptions on the device.
func (l *AdoptedSpans) Add(s Span, total int64) (clash Span, held int64, ok bool) {
	if l == nil {
		return Span{}, 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.spans, s.Ptr, func(x Span, p uintptr) int { return cmp.Compare(x.Ptr, p) })
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(l.spans) {
			continue
		}
		if o := l.spans[j]; o.Ptr < s.end() && s.Ptr < o.end() {
			return o, l.bytes, false
		}
	}
	if s.Bytes > total-l.bytes { // l.bytes <= total: no overflow
		return Span{}, l.bytes, false
	}
	l.spans = slices.Insert(l.spans, i, s)
	l.bytes += s.Bytes
	return Span{}, l.bytes, true
}

// Remove forgets the span at ptr; harmless if there is none or l is nil.
func (l *AdoptedSpans) Remove(ptr uintptr) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	i, found := slices.BinarySearchFunc(l.spans, ptr, func(x Span, p uintptr) int { return cmp.Compare(x.Ptr, p) })
	if found {
		l.bytes -= l.spans[i].Bytes
		l.spans = slices.Delete(l.spans, i, i+1)
	}
}

// Held returns the live adoptions' count and bytes.
func (l *AdoptedSpans) Held() (n int, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spans), l.bytes
}
