package tensor

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/track"
)

// AdoptedKind is the kind of adopted tensors made without Spec.Kind: they
// are counted apart from the tensors tensorlife allocated.
const AdoptedKind = "adopted"

// ForeignMemory is device memory that someone else allocated (a cgo
// runtime, a math library) and that Adopt makes an owned tensor of.
type ForeignMemory struct {
	// Device is the device the memory is on; its name files the memory in
	// reports, and copies to and from the tensor go through it.
	Device Device
	// Ptr is the first byte; it must not be 0.
	Ptr DevicePtr
	// Bytes is the size of the allocation: more than 0 and at most the
	// device's total memory (MemInfo). The tensor's shape may cover less of
	// it. All of it counts as held by tensorlife until the release.
	Bytes int64
	// Release gives the memory back to whoever allocated it. It is called
	// exactly once, with Ptr, when the tensor's last owner frees, or when
	// the garbage collector reclaims a dropped handle (if the tracker
	// reclaims leaks); never if Adopt fails.
	//
	// Release is foreign code, and is run as such. A panic in it is
	// recovered and returned as an error matching ErrForeignPanic (a
	// *ForeignPanicError inside a *DeviceError); an error it returns comes
	// back inside a *DeviceError. After a Free it runs on the goroutine that
	// called Free, and Free returns its error. After a dropped handle it
	// never runs on the runtime's finalizer goroutine: it is queued for a
	// releaser goroutine (see Adopt), and its error, with nobody to return
	// it to, is counted in the tracker's AdoptedStats (Adoptions; nowhere
	// for an untracked adoption). It may run concurrently with the Release
	// functions of other adoptions.
	Release func(DevicePtr) error
}

// Adopt makes an owned tensor of memory allocated outside tensorlife: from
// then on the memory is tensorlife's, like any tensor's. The tensor is
// recorded in tracker at Adopt's caller with ctx's labels, as kind
// spec.Kind (AdoptedKind if empty); reports, profiles and leak checks name
// the adopting line. Free, Retain, View, double frees, use after free and
// handles dropped without Free behave as for any tensor, and the memory
// goes back through mem.Release exactly once. A nil tracker makes an
// untracked tensor.
//
// spec's shape must be non-empty and fit in mem.Bytes. Bad input returns an
// error matching ErrNilAllocator (no device or no Release), ErrInvalidPointer
// (a zero Ptr), ErrInvalidSize (Bytes not above 0, above the device's total
// memory, or above what the device's other live adoptions leave of it),
// ErrAlreadyAdopted (memory overlapping another live adoption on the same
// device, in any tracker), ErrInvalidShape or ErrSizeMismatch; a device
// whose MemInfo fails returns its error in a *DeviceError. On any error the
// memory stays the caller's and Release is not called. The checks against
// the device's other live adoptions are the device's own (LiveAdoptions,
// which HostDevice and the CUDA device embed); a device without one is
// checked against its total memory only.
//
// While adopted, the memory is counted as held by tensorlife on its device
// (track.Tracker.ReservedOn, the summary's Devices section, AdoptedStats),
// not as memory outside tensorlife. It leaves those books when Release is
// called, whether Release then succeeds, fails or panics: from then on
// tensorlife holds nothing of it, and memory a failed Release kept shows as
// used outside tensorlife, which it is. A Release queued after a dropped
// handle keeps the memory on the books until it runs.
//
// The release queue: a finalizer only queues a dropped adoption's
// Release, so a blocking or panicking Release never stalls or kills the
// runtime's finalizer goroutine, and other leak reports keep arriving. The
// queue is drained by releaser goroutines that tensorlife starts only
// while the queue holds work and that end as soon as it is empty: there is
// nothing to stop. At most four run at once, a new one starting only when
// every running one is inside a Release, so up to three Release calls that
// never return delay nothing but themselves; a fourth would delay the
// queued releases behind it, never anything else.
//
//go:noinline
func Adopt(ctx context.Context, tracker *track.Tracker, mem ForeignMemory, spec Spec) (*Tensor, error) {
	if invariants.IsNil(mem.Device) {
		return nil, fmt.Errorf("%w: Adopt: nil ForeignMemory.Device", ErrNilAllocator)
	}
	if mem.Release == nil {
		return nil, fmt.Errorf("%w: Adopt: nil ForeignMemory.Release", ErrNilAllocator)
	}
	if mem.Ptr == 0 {
		return nil, fmt.Errorf("%w: Adopt: zero ForeignMemory.Ptr", ErrInvalidPointer)
	}
	if mem.Bytes <= 0 {
		return nil, fmt.Errorf("%w: Adopt: ForeignMemory.Bytes %d", ErrInvalidSize, mem.Bytes)
	}
	need, err := spec.Shape.Bytes(spec.DType)
	if err != nil {
		return nil, err
	}
	if need == 0 || need > mem.Bytes {
		return nil, fmt.Errorf("%w: Adopt: %v%v needs %d bytes of a %d-byte allocation",
			ErrSizeMismatch, spec.DType, spec.Shape, need, mem.Bytes)
	}
	name := mem.Device.Name()
	_, total, err := mem.Device.MemInfo()
	if err != nil {
		return nil, &DeviceError{Op: "meminfo", Device: name, Bytes: mem.Bytes, Err: err}
	}
	if mem.Bytes > total {
		return nil, fmt.Errorf("%w: Adopt: ForeignMemory.Bytes %d is more than %s's total memory, %d bytes",
			ErrInvalidSize, mem.Bytes, name, total)
	}
	kind := spec.Kind
	if kind == "" {
		kind = AdoptedKind
	}
	a := &adoption{books: adoptionBooks(tracker, mem.Device), tracker: tracker, mem: mem}
	if err := a.live().add(a, total); err != nil {
		return nil, err
	}
	t, err := newTensor(ctx, a, spec.DType, spec.Shape, kind, 1)
	if err != nil {
		a.live().remove(a) // a.owned is false: the memory stays the caller's
		return nil, err
	}
	a.owned.Store(true)
	if a.books != nil {
		a.books.add(mem.Bytes)
	}
	return t, nil
}

// adoption is the allocator of one adopted tensor: its Allocate hands out
// the foreign memory once, to newTensor, and its Release calls the foreign
// release function once.
type adoption struct {
	books   *adoptedBooks // nil for an untracked adoption: nobody reads them
	tracker *track.Tracker
	mem     ForeignMemory
	handed  atomic.Bool // Allocate has handed the memory out
	owned   atomic.Bool // Adopt succeeded: Release must release
	done    atomic.Bool // Release has run
	next    *adoption   // the next in the release queue, under its lock
}

func (a *adoption) Device() Device { return a.mem.Device }

// live returns the live adoptions of a's device; nil for a device that
// keeps none.
func (a *adoption) live() *LiveAdoptions {
	if d, ok := a.mem.Device.(adoptionHolder); ok {
		return d.liveAdoptions()
	}
	return nil
}
func (a *adoption) Tracker() *track.Tracker { return a.tracker }

// Allocate hands out the adopted memory, once: adopted memory is one
// allocation, made by someone else.
func (a *adoption) Allocate(bytes int64) (Block, error) {
	if bytes > a.mem.Bytes || !a.handed.CompareAndSwap(false, true) {
		return Block{}, fmt.Errorf("%w: adopted memory at %#x is one allocation", ErrForeignBlock, uintptr(a.mem.Ptr))
	}
	return Block{Ptr: a.mem.Ptr, Size: a.mem.Bytes}, nil
}

// Release calls the foreign release function, the first time only, and
// only once Adopt has succeeded: a failed Adopt leaves the memory to its
// caller. The memory leaves the books first (see Adopt), and a panic is
// recovered into the error returned.
func (a *adoption) Release(b Block) error {
	if b.Ptr != a.mem.Ptr {
		return fmt.Errorf("%w: block %#x", ErrForeignBlock, uintptr(b.Ptr))
	}
	if !a.owned.Load() {
		return nil
	}
	if !a.done.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: adopted memory at %#x released twice", ErrInvalidPointer, uintptr(a.mem.Ptr))
	}
	if a.books != nil {
		a.books.remove(a.mem.Bytes)
	}
	a.live().remove(a)
	err := callRelease(a.mem.Release, a.mem.Ptr)
	if err == nil {
		return nil
	}
	if a.books != nil {
		a.books.failed(err)
	}
	return &DeviceError{Op: "release adopted", Device: a.mem.Device.Name(), Bytes: a.mem.Bytes, Err: err}
}

// adoptedBooks count the adopted memory on one device of one tracker, for
// the tracker's allocator registry: it is a track.Reserver whose reserved
// bytes are the adopted bytes not yet released. It lives as long as its
// tracker, on the tracker's shelf (track.Local).
type adoptedBooks struct {
	books
	device string
	// pending counts dropped adoptions whose Release is queued or running;
	// failures counts the Release calls that returned an error, panics
	// those that panicked.
	pending, failures, panics atomic.Int64
	lastDropped               atomic.Pointer[error] // see AdoptedStats.LastDroppedErr
}

// Reserved reports the adopted bytes still held on the device.
func (b *adoptedBooks) Reserved() (device string, bytes int64) { return b.device, b.reserved.Load() }

// failed counts a Release that returned err or panicked.
func (b *adoptedBooks) failed(err error) {
	if isForeignPanic(err) {
		b.panics.Add(1)
	} else {
		b.failures.Add(1)
	}
}

// AdoptedStats are the figures of the memory adopted (Adopt) on one device
// of one tracker. Each is exact; they are not read at one instant together.
type AdoptedStats struct {
	// AllocatorStats count the adoptions: Reserved is the adopted bytes not
	// yet released, Blocks the adoptions not yet released, Allocs the
	// successful Adopt calls, Frees the Release calls (whatever their
	// outcome).
	AllocatorStats
	// Pending counts the adoptions whose last handle the garbage collector
	// found dropped and whose Release is queued for, or running on, a
	// releaser goroutine; a queued one's bytes stay in Reserved until its
	// Release starts.
	Pending int64
	// Failed counts the Release calls that returned an error, Panicked
	// those that panicked (the panic recovered), on any goroutine.
	Failed, Panicked int64
	// LastDroppedErr is the error of the latest failed or panicking Release
	// of a dropped adoption, which no caller could be handed; nil if none.
	// It matches ErrForeignPanic for a panic.
	LastDroppedErr error
}

// Adoptions returns the figures of tr's adopted memory, one AdoptedStats
// per device that has had an adoption, sorted by device name; nil for a
// nil tracker (untracked adoptions are counted nowhere). It is safe for
// concurrent use and reads counters only.
func Adoptions(tr *track.Tracker) []AdoptedStats {
	if tr == nil {
		return nil
	}
	shelf := adoptedShelfOf(tr)
	shelf.mu.Lock()
	list := slices.Clone(shelf.books)
	shelf.mu.Unlock()
	out := make([]AdoptedStats, 0, len(list))
	for _, b := range list {
		st := AdoptedStats{AllocatorStats: b.stats(b.device), Pending: b.pending.Load(),
			Failed: b.failures.Load(), Panicked: b.panics.Load()}
		if p := b.lastDropped.Load(); p != nil {
			st.LastDroppedErr = *p
		}
		out = append(out, st)
	}
	slices.SortStableFunc(out, func(x, y AdoptedStats) int { return cmp.Compare(x.Device, y.Device) })
	return out
}

// adoptionBooks finds the books of adoptions on dev in tracker, or makes
// and attaches them; nil for a nil tracker, whose adoptions no report
// counts.
func adoptionBooks(tracker *track.Tracker, dev Device) *adoptedBooks {
	if tracker == nil {
		return nil
	}
	name := dev.Name()
	shelf := adoptedShelfOf(tracker)
	shelf.mu.Lock()
	defer shelf.mu.Unlock()
	for _, b := range shelf.books {
		if b.device == name {
			return b
		}
	}
	b := &adoptedBooks{device: name}
	track.Attach(tracker, b)
	shelf.books = append(shelf.books, b)
	return b
}

// adoptedShelf keeps a tracker's adoption books, one per device, for as
// long as the tracker lives: the tracker holds its parts weakly, and the
// counts of failed releases (AdoptedStats) must outlive the adoptions they
// count. It is the tracker's (track.Local), and goes with it.
type adoptedShelf struct {
	mu    sync.Mutex
	books []*adoptedBooks
}

// adoptedShelfKey files the adoption books in a tracker.
type adoptedShelfKey struct{}

// adoptedShelfOf returns tr's adoption books.
func adoptedShelfOf(tr *track.Tracker) *adoptedShelf {
	return track.Local(tr, adoptedShelfKey{}, func() *adoptedShelf { return &adoptedShelf{} })
}

// LiveAdoptions is a device's record of the foreign memory adopted on it
// (Adopt) and not yet released, in every tracker: Adopt checks new memory
// against it, so that memory is not adopted twice and a device's adoptions
// never add up to more than it has. A Device implementation embeds it, as
// the CUDA device does (HostDevice keeps one too), to have those checks.
// The zero value is ready; it must not be copied after first use.
type LiveAdoptions struct {
	mu sync.Mutex
	// spans are the live adoptions' ranges, sorted by first byte and never
	// overlapping; bytes is their sum.
	spans []span
	bytes int64
}

// liveAdoptions gives Adopt the record of a device that embeds it.
func (l *LiveAdoptions) liveAdoptions() *LiveAdoptions { return l }

// adoptionHolder is a device that keeps its live adoptions.
type adoptionHolder interface{ liveAdoptions() *LiveAdoptions }

// span is the memory of one adoption: [ptr, ptr+bytes).
type span struct {
	ptr   DevicePtr
	bytes int64
}

// end returns the first address past s; DevicePtr arithmetic wraps, so a
// range reaching past the address space ends at its top.
func (s span) end() DevicePtr {
	e := s.ptr + DevicePtr(s.bytes)
	if e < s.ptr {
		return ^DevicePtr(0)
	}
	return e
}

// add registers a's memory on its device, whose total memory is total, or
// says why it cannot be adopted; a nil l (a device without the record)
// registers nothing. Inserting keeps the ranges sorted: O(log n) to find
// the place and a copy of the ranges after it, for n live adoptions on the
// device.
func (l *LiveAdoptions) add(a *adoption, total int64) error {
	if l == nil {
		return nil
	}
	s := span{ptr: a.mem.Ptr, bytes: a.mem.Bytes}
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.spans, s.ptr, func(x span, p DevicePtr) int { return cmp.Compare(x.ptr, p) })
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(l.spans) {
			continue
		}
		if o := l.spans[j]; o.ptr < s.end() && s.ptr < o.end() {
			return fmt.Errorf("%w: Adopt: %d bytes at %#x overlap the %d bytes at %#x adopted on %s",
				ErrAlreadyAdopted, s.bytes, uintptr(s.ptr), o.bytes, uintptr(o.ptr), a.mem.Device.Name())
		}
	}
	if s.bytes > total-l.bytes { // l.bytes <= total: no overflow
		return fmt.Errorf("%w: Adopt: ForeignMemory.Bytes %d is more than the %d bytes that the live adoptions on %s (%d bytes) leave of its total memory",
			ErrInvalidSize, s.bytes, max(total-l.bytes, 0), a.mem.Device.Name(), l.bytes)
	}
	l.spans = slices.Insert(l.spans, i, s)
	l.bytes += s.bytes
	return nil
}

// remove forgets a's memory; harmless if it was never added or l is nil.
func (l *LiveAdoptions) remove(a *adoption) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	i, found := slices.BinarySearchFunc(l.spans, a.mem.Ptr, func(x span, p DevicePtr) int { return cmp.Compare(x.ptr, p) })
	if found {
		l.bytes -= l.spans[i].bytes
		l.spans = slices.Delete(l.spans, i, i+1)
	}
}

// held returns the live adoptions' count and bytes.
func (l *LiveAdoptions) held() (n int, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spans), l.bytes
}
