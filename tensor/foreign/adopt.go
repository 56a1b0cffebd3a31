package foreign

import (
	"context"
	"fmt"
	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"sync/atomic"
)

// Kind is the kind of adopted tensors made without Spec.Kind: they are
// counted apart from the tensors tensorlife allocated.
const Kind = "adopted"

// Memory is device memory that someone else allocated (a cgo runtime, a
// math library) and that Adopt makes an owned tensor of.
type Memory struct {
	// Device is the device the memory is on; its name files the memory in
	// reports, and copies to and from the tensor go through it.
	Device tensor.Device
	// Ptr is the first byte; it must not be 0.
	Ptr tensor.DevicePtr
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
	// recovered and returned as an error matching ErrPanic (a *PanicError
	// inside a *tensor.DeviceError); an error it returns comes back inside
	// a *tensor.DeviceError. After a Free it runs on the goroutine that
	// called Free, and Free returns its error. After a dropped handle it
	// never runs on the runtime's finalizer goroutine: it is queued for a
	// releaser goroutine (see the package doc), and its error, with nobody
	// to return it to, is counted in the tracker's Stats (Adoptions;
	// nowhere for an untracked adoption). It may run concurrently with the
	// Release functions of other adoptions.
	Release func(tensor.DevicePtr) error
}

// Adopt makes an owned tensor of memory allocated outside tensorlife: from
// then on the memory is tensorlife's, like any tensor's. The tensor is
// recorded in tracker at Adopt's caller with ctx's labels, as kind
// spec.Kind (Kind if empty); reports, profiles and leak checks name the
// adopting line. Free, Retain, View, double frees, use after free and
// handles dropped without Free behave as for any tensor, and the memory
// goes back through mem.Release exactly once. A nil tracker makes an
// untracked tensor.
//
// spec's shape must be non-empty and fit in mem.Bytes. Bad input returns
// an error matching tensor.ErrNilAllocator (no device or no Release),
// tensor.ErrInvalidPointer (a zero Ptr), tensor.ErrInvalidSize (Bytes not
// above 0, above the device's total memory, or above what the device's
// other live adoptions leave of it), ErrAlreadyAdopted (memory overlapping
// another live adoption on the same device, in any tracker),
// tensor.ErrInvalidShape or tensor.ErrSizeMismatch; a device whose MemInfo
// fails returns its error in a *tensor.DeviceError. On any error the
// memory stays the caller's and Release is not called. The checks against
// the device's other live adoptions are the device's own (LiveAdoptions,
// which tensor.HostDevice and the CUDA device embed); a device without one
// is checked against its total memory only.
//
// While adopted, the memory is counted as held by tensorlife on its device
// (Tracker.ReservedOn, the summary's Devices section, Stats), not as
// memory outside tensorlife. It leaves those books when Release is called,
// whether Release then succeeds, fails or panics: from then on tensorlife
// holds nothing of it, and memory a failed Release kept shows as used
// outside tensorlife, which it is. A Release queued after a dropped handle
// keeps the memory on the books until it runs.
//
//go:noinline
func Adopt(ctx context.Context, tracker *track.Tracker, mem Memory, spec tensor.Spec) (*tensor.Tensor, error) {
	if invariants.IsNil(mem.Device) {
		return nil, fmt.Errorf("%w: foreign.Adopt: nil Memory.Device", tensor.ErrNilAllocator)
	}
	if mem.Release == nil {
		return nil, fmt.Errorf("%w: foreign.Adopt: nil Memory.Release", tensor.ErrNilAllocator)
	}
	if mem.Ptr == 0 {
		return nil, fmt.Errorf("%w: foreign.Adopt: zero Memory.Ptr", tensor.ErrInvalidPointer)
	}
	if mem.Bytes <= 0 {
		return nil, fmt.Errorf("%w: foreign.Adopt: Memory.Bytes %d", tensor.ErrInvalidSize, mem.Bytes)
	}
	need, err := spec.Shape.Bytes(spec.DType)
	if err != nil {
		return nil, err
	}
	if need == 0 || need > mem.Bytes {
		return nil, fmt.Errorf("%w: foreign.Adopt: %v%v needs %d bytes of a %d-byte allocation",
			tensor.ErrSizeMismatch, spec.DType, spec.Shape, need, mem.Bytes)
	}
	name, total, err := deviceFigures(tracker, mem)
	if err != nil {
		return nil, err
	}
	if mem.Bytes > total {
		return nil, fmt.Errorf("%w: foreign.Adopt: Memory.Bytes %d is more than %s's total memory, %d bytes",
			tensor.ErrInvalidSize, mem.Bytes, name, total)
	}
	if spec.Kind == "" {
		spec.Kind = Kind
	}
	books, err := adoptionBooks(tracker, name)
	if err != nil {
		return nil, err
	}
	a := &adoption{books: books, tracker: tracker, mem: mem, name: name,
		live: adoptionsOf(mem.Device)}
	if err := a.register(total); err != nil {
		return nil, err
	}
	t, err := tensor.Make(ctx, a, spec)
	if err != nil {
		a.live.Remove(mem.Ptr) // a.owned is false: the memory stays the caller's
		return nil, err
	}
	a.owned.Store(true)
	if a.books != nil {
		a.books.add(mem.Bytes)
	}
	return t, nil
}

// adoptionsOf returns dev's record of its adoptions; nil if it keeps none.
func adoptionsOf(dev tensor.Device) *tensor.LiveAdoptions {
	if k, ok := dev.(tensor.AdoptionKeeper); ok {
		return k.Adoptions()
	}
	return nil
}

// adoption is the allocator of one adopted tensor: its Allocate hands out
// the foreign memory once, to the tensor Adopt makes, and its Release calls
// the foreign release function once.
type adoption struct {
	books   *books // nil for an untracked adoption: nobody reads them
	tracker *track.Tracker
	mem     Memory
	name    string                // mem.Device.Name() at Adopt
	live    *tensor.LiveAdoptions // the device's live adoptions; nil if it keeps none
	handed  atomic.Bool           // Allocate has handed the memory out
	owned   atomic.Bool           // Adopt succeeded: Release must release
	done    atomic.Bool           // Release has run
}

// register adds a's memory to its device's live adoptions, or says why it
// cannot be adopted; total is the device's total memory.
func (a *adoption) register(total int64) error {
	s := tensor.AdoptedSpan{Ptr: a.mem.Ptr, Bytes: a.mem.Bytes}
	clash, held, ok := a.live.Add(s, total)
	switch {
	case ok:
		return nil
	case clash.Bytes > 0:
		return fmt.Errorf("%w: foreign.Adopt: %d bytes at %#x overlap the %d bytes at %#x adopted on %s",
			ErrAlreadyAdopted, s.Bytes, s.Ptr, clash.Bytes, clash.Ptr, a.name)
	default:
		return fmt.Errorf("%w: foreign.Adopt: Memory.Bytes %d is more than the %d bytes that the live adoptions on %s (%d bytes) leave of its total memory",
			tensor.ErrInvalidSize, s.Bytes, max(total-held, 0), a.name, held)
	}
}

// Device returns the device the adopted memory is on.
func (a *adoption) Device() tensor.Device { return a.mem.Device }

// Tracker returns the tracker the adopted tensor is recorded in.
func (a *adoption) Tracker() *track.Tracker { return a.tracker }

// Allocate hands out the adopted memory, once: adopted memory is one
// allocation, made by someone else.
func (a *adoption) Allocate(bytes int64) (tensor.Block, error) {
	if bytes > a.mem.Bytes || !a.handed.CompareAndSwap(false, true) {
		return tensor.Block{}, fmt.Errorf("%w: adopted memory at %#x is one allocation", tensor.ErrForeignBlock, uintptr(a.mem.Ptr))
	}
	return tensor.Block{Ptr: a.mem.Ptr, Size: a.mem.Bytes}, nil
}

// Release calls the foreign release function, the first time only, and
// only once Adopt has succeeded: a failed Adopt leaves the memory to its
// caller. The memory leaves the books first (see Adopt), and a panic is
// recovered into the error returned.
func (a *adoption) Release(b tensor.Block) error {
	if b.Ptr != a.mem.Ptr {
		return fmt.Errorf("%w: block %#x", tensor.ErrForeignBlock, uintptr(b.Ptr))
	}
	if !a.owned.Load() {
		return nil
	}
	if !a.done.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: adopted memory at %#x released twice", tensor.ErrInvalidPointer, uintptr(a.mem.Ptr))
	}
	if a.books != nil {
		a.books.remove(a.mem.Bytes)
	}
	a.live.Remove(a.mem.Ptr)
	err := callRelease(a.tracker, a.mem.Release, a.mem.Ptr)
	if err == nil {
		return nil
	}
	if a.books != nil {
		a.books.failed(err)
	}
	return &tensor.DeviceError{Op: "release adopted", Device: a.name, Bytes: a.mem.Bytes, Err: err}
}

// ReleaseDropped runs the Release of an adoption whose last handle the
// garbage collector found dropped, on package tensor's releaser
// (tensor.DroppedReleaser): nobody is left to hand its error to, so it is
// counted and kept in the books (Stats).
func (a *adoption) ReleaseDropped(tensor.Block) {
	b := a.books
	if b != nil {
		b.pending.Add(1)
		defer b.pending.Add(-1) // also if Release ends the goroutine
	}
	err := a.Release(tensor.Block{Ptr: a.mem.Ptr})
	if err != nil && b != nil {
		b.lastDropped.Store(&err)
	}
}
