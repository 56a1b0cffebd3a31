package tensor

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/isnil"
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
	// Bytes is the size of the allocation (> 0); the tensor's shape may
	// cover less of it. All of it counts as held by tensorlife until the
	// release.
	Bytes int64
	// Release gives the memory back to whoever allocated it. It is called
	// exactly once, with Ptr, when the tensor's last owner frees (or the
	// garbage collector reclaims a dropped handle, if the tracker reclaims
	// leaks), and never if Adopt fails. It may run on any goroutine,
	// including the runtime's cleanup goroutine, so it must not block long.
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
// (a zero Ptr), ErrInvalidSize, ErrInvalidShape or ErrSizeMismatch; on any
// error the memory stays the caller's and Release is not called.
//
// While adopted, the memory is counted as held by tensorlife on its device
// (track.Tracker.ReservedOn, the summary's Devices section), not as memory
// outside tensorlife.
//
//go:noinline
func Adopt(ctx context.Context, tracker *track.Tracker, mem ForeignMemory, spec Spec) (*Tensor, error) {
	if isnil.Value(mem.Device) {
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
	kind := spec.Kind
	if kind == "" {
		kind = AdoptedKind
	}
	a := &adoption{books: adoptionBooks(tracker, mem.Device), tracker: tracker, mem: mem}
	t, err := newTensor(ctx, a, spec.DType, spec.Shape, kind, 1)
	if err != nil {
		return nil, err // a.owned is false: the memory stays the caller's
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
}

func (a *adoption) Device() Device          { return a.mem.Device }
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
// caller.
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
	if err := a.mem.Release(a.mem.Ptr); err != nil {
		return &DeviceError{Op: "release adopted", Device: a.mem.Device.Name(), Bytes: a.mem.Bytes, Err: err}
	}
	return nil
}

// adoptedBooks count the adopted memory on one device of one tracker, for
// the tracker's allocator registry: it is a report.PoolSource whose reserved
// bytes are the adopted bytes not yet released. Every adoption on the
// device holds it, so it lives as long as one of them does.
type adoptedBooks struct {
	books
	device string
}

// Reserved reports the adopted bytes still held on the device.
func (b *adoptedBooks) Reserved() (device string, bytes int64) { return b.device, b.reserved.Load() }

// adoptionBooks finds the books of adoptions on dev in tracker's registry,
// or makes and attaches them; nil for a nil tracker, whose adoptions no
// report counts. Two Adopt calls racing on a new device may make two
// books; each counts its own adoptions, so the sums stay right.
func adoptionBooks(tracker *track.Tracker, dev Device) *adoptedBooks {
	if tracker == nil {
		return nil
	}
	name := dev.Name()
	for _, s := range tracker.Allocators() {
		if b, ok := s.(*adoptedBooks); ok && b.device == name {
			return b
		}
	}
	b := &adoptedBooks{device: name}
	track.Attach(tracker, b)
	return b
}
