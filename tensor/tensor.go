package tensor

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/tensorlife/tensorlife/internal/format"

	"github.com/tensorlife/tensorlife/internal/heapfence"
	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/track"
)

// DefaultKind is the kind of tensors made without Spec.Kind.
const DefaultKind = "tensor"

// Spec describes a tensor to make.
type Spec struct {
	DType DType
	Shape Shape
	// Kind says what the tensor is for ("mask", "kv-cache", "logits"); it is
	// recorded with the allocation and is a metrics attribute, so keep it
	// low-cardinality. Empty means DefaultKind.
	Kind string
}

// Tensor is an owned handle to a block of device memory with a dtype and a
// shape. The handle is an owner: Free gives its ownership up, and the memory
// returns to its allocator when the last owner has freed (see Retain). After
// Free, every operation returns ErrFreed and is noted to the tracker as a
// use after free, and a second Free returns a *DoubleFreeError; the
// accessors (ID, DType, Shape, Bytes, Kind, Device) keep answering, so
// error messages can still describe the handle.
//
// Every handle remembers the line that made it (New, Retain, View), so a
// leak report names the handle that still holds the memory: "held by a View
// made at decode.go:88".
//
// A handle dropped without Free is reported as a leak, a diagnosis and not
// a way to free; it carries a finalizer for that, so never set one on it
// (see the package doc).
//
// A Tensor is safe for concurrent reads and copies; Free must not race with
// other calls on the same handle. Tensors must not be copied by value.
type Tensor struct {
	// b is the block this handle owns a share of; nil in the handle New
	// returned for an untracked tensor, which shares one allocation with
	// its block (inline; see ownedTensor). Read it with blk.
	b *block
	// site is where a Retain or View handle was made; nil for the
	// allocation's own handle (its site is the record's) and untracked ones.
	site *track.Site
	// ext is what few handles keep: a View's window, the owner HandTo
	// gave the allocation to through this handle. nil for most.
	ext *handleExt
	// state is 0 while the handle is live; once freed, freedUnknown plus
	// the number of the line that freed it, if kept.
	state  atomic.Uint32
	how    uint8 // howOwn, howRetain, howView, or an owner's index
	inline bool  // the handle is an ownedTensor's: its block follows it
}

// handleExt is what a handle keeps beyond its block, each handle its own.
type handleExt struct {
	// view is the handle's window on the block, shared by the handles
	// retained from it; nil for the whole block.
	view *window
	// owner is what HandTo gave the allocation to through this handle:
	// the handle keeps it reachable (an owner lives as long as what it
	// holds), and its Free, HandBack or drop ends the owner's hold.
	owner *track.Owner
	// ticket is what the handle's cleanup reads once the handle is
	// unreachable, set at its first HandTo: from then on its drop is
	// watched by runtime.AddCleanup, not a finalizer, since the handle
	// and its owner (a cache that keeps the handle) may form a cycle, on
	// which a finalizer never runs.
	ticket  *dropTicket
	cleanup runtime.Cleanup
	// borrow is the request the handle was taken under (RetainContext),
	// returned when the handle is freed, handed to an owner or dropped.
	borrow *track.Borrow
}

// dropTicket is a handle's drop report without the handle: its block, the
// line that made it, how, and the owner it held for, weakly, so that the
// ticket, which the runtime keeps until the handle is collected, keeps
// neither the handle nor the owner alive.
type dropTicket struct {
	b    *block
	site *track.Site
	how  uint8

	mu    sync.Mutex
	owner weak.Pointer[track.Owner] // zero: none
}

// setOwner records the owner the handle holds for; nil for none.
func (d *dropTicket) setOwner(o *track.Owner) {
	var w weak.Pointer[track.Owner]
	if o != nil {
		w = weak.Make(o)
	}
	d.mu.Lock()
	d.owner = w
	d.mu.Unlock()
}

// dropped is the cleanup of a handle handed to an owner: dropHandle with
// the owner the handle held for.
func (d *dropTicket) dropped() {
	d.mu.Lock()
	o := d.owner
	d.mu.Unlock()
	dropHandle(d.b, d.site, d.how, o)
}

// viewOf returns the handle's window on its block; nil for the whole block.
func (t *Tensor) viewOf() *window {
	if t.ext != nil {
		return t.ext.view
	}
	return nil
}

// blk returns the block this handle owns a share of; nil for a zero Tensor.
func (t *Tensor) blk() *block {
	if t.inline {
		return &(*ownedTensor)(unsafe.Pointer(t)).b
	}
	return t.b
}

// ownedTensor is an untracked tensor as New makes it: the handle New
// returns, then its block, then what a tracked tensor keeps in its record
// (its byte count and Meta) and the id an untracked tensor is numbered by,
// in one allocation of 112 B, with one finalizer for all.
//
// A tracked tensor cannot be laid out so: its tracker's registry holds the
// record in the block, so a handle in the same allocation would never
// become unreachable and a dropped handle would never be reported. An
// untracked tensor reports nothing; the garbage collector only has to give
// back the share of a handle dropped without Free. The ownedTensor's
// finalizer does that for the handle New returned; it runs once that
// handle and every Retain or View handle (each points into the object, and
// carries a finalizer of its own) are unreachable, and the last owner's
// Free takes it off. Half the allocations and finalizers of a
// handle-and-block pair, and no tracker record it would never fill, make
// an untracked New+Free about as cheap as any GC-watched handle can be.
// The price: if the handle New returned is dropped without Free, the
// memory returns once no handle of the tensor is reachable, freed or not,
// rather than when the others are freed.
//
// The own handle cannot point at its block: a pointer from an object to
// itself would keep its finalizer from ever running. It finds the block by
// its place instead (blk), which is why its Tensor comes first and why a
// Tensor must never be copied by value (go vet's copylocks check reports
// such copies).
type ownedTensor struct {
	own Tensor // first: a pointer to it is a pointer to the ownedTensor
	// meta is the tensor's kind, device, dtype and shape: with the
	// pointers first (the handle's, meta, the block's allocator), the
	// collector reads 56 bytes of the 112.
	meta  *track.Meta
	b     block
	bytes int64 // device bytes the tensor holds
	// id is the tensor's process-wide number, taken the first time it is
	// asked for (ident).
	id atomic.Uint64
}

// An untracked tensor fits the 112-byte size class: this fails to compile
// otherwise.
var _ = [1]struct{}{}[(unsafe.Sizeof(ownedTensor{})-1)/112]

// ownerOf returns the ownedTensor holding b, an untracked tensor's block.
func ownerOf(b *block) *ownedTensor {
	return (*ownedTensor)(unsafe.Add(unsafe.Pointer(b), -int(unsafe.Offsetof(ownedTensor{}.b))))
}

// collected runs when no handle of an untracked tensor is reachable any
// more while one still owns the memory (the last owner's Free takes the
// finalizer off): it gives the memory back.
func (o *ownedTensor) collected() {
	_ = o.b.release(true, nil) // nobody is left to hand an error to
}

// How a handle was made, for reports (track.Holder.How).
const (
	howOwn uint8 = iota
	howRetain
	howView
)

// owners names the kinds of handle reports tell apart: the three above, then
// the owners named with RetainFor, copied on write. A handle keeps an index
// into it, one byte.
var (
	ownersMu sync.Mutex
	owners   atomic.Pointer[[]string]
)

// "allocation" is how track names an allocation's own handle (Holder.Own).
func init() { owners.Store(&[]string{howOwn: "allocation", howRetain: "Retain", howView: "View"}) }

// maxOwners bounds the owner names RetainFor keeps apart; further names are
// reported as "Retain".
const maxOwners = 64

func howName(how uint8) string { return (*owners.Load())[how] }

// ownerIndex returns the index of owner's name, adding it if there is room.
func ownerIndex(owner string) uint8 {
	for i, n := range *owners.Load() {
		if n == owner {
			return uint8(i)
		}
	}
	ownersMu.Lock()
	defer ownersMu.Unlock()
	cur := *owners.Load()
	for i, n := range cur {
		if n == owner {
			return uint8(i)
		}
	}
	if len(cur) >= maxOwners {
		return howRetain
	}
	next := append(cur[:len(cur):len(cur)], owner)
	owners.Store(&next)
	return uint8(len(next) - 1)
}

// window is a View's part of its block.
type window struct {
	off, bytes int64
	shape      Shape
}

// block is the memory shared by every handle of one tensor. It never
// points at a handle, so handles stay collectable. It is the head of one
// of two objects: a trackedBlock, whose record its tracker's registry
// holds, or an ownedTensor, an untracked tensor's handle and block in one;
// tracked says which. It holds nothing twice: kind and shape are in the
// shared Meta, the byte count beside it (in the record of a tracked
// tensor), so that a live tensor (block, handle, finalizer) stays within
// 256 B of host memory.
type block struct {
	alloc Allocator
	mem   Block
	// extra counts the owners beyond one: zero, its initial value, while
	// one owner is left.
	extra   atomic.Int32
	dtype   DType
	tracked bool // the block heads a trackedBlock; else an ownedTensor
}

// trackedBlock is a tracked tensor's block: the block, then the record its
// tracker's registry holds.
type trackedBlock struct {
	block // first: a pointer to it is a pointer to the trackedBlock
	rec   track.Record
}

// record returns a tracked tensor's record; nil for an untracked one.
func (b *block) record() *track.Record {
	if !b.tracked {
		return nil
	}
	return &(*trackedBlock)(unsafe.Pointer(b)).rec
}

// bytes returns the device bytes the tensor holds.
func (b *block) bytes() int64 {
	if b.tracked {
		return (*trackedBlock)(unsafe.Pointer(b)).rec.Bytes
	}
	return ownerOf(b).bytes
}

// meta returns the tensor's shared Meta; nil before New set it.
func (b *block) meta() *track.Meta {
	if b.tracked {
		return (*trackedBlock)(unsafe.Pointer(b)).rec.Meta
	}
	return ownerOf(b).meta
}

// untrackedIDs numbers untracked tensors, in the order their ids are
// first asked for: no allocation pays for an id nobody reads.
var untrackedIDs atomic.Uint64

// ident returns the tensor's id: its record's, or for an untracked tensor
// a process-wide number.
func (b *block) ident() uint64 {
	if r := b.record(); r != nil {
		return r.ID()
	}
	o := ownerOf(b)
	if id := o.id.Load(); id != 0 {
		return id
	}
	o.id.CompareAndSwap(0, untrackedIDs.Add(1))
	return o.id.Load()
}

// New makes a tensor of dtype dt and shape dims from alloc. The tensor is
// recorded in alloc's tracker with the caller's stack and ctx's labels.
// A zero dimension makes an empty tensor that holds no device memory.
//
//go:noinline
func New(ctx context.Context, alloc Allocator, dt DType, dims ...int) (*Tensor, error) {
	return newTensor(ctx, alloc, dt, dims, "", 1)
}

// Make makes a tensor as New does, from a Spec.
//
//go:noinline
func Make(ctx context.Context, alloc Allocator, spec Spec) (*Tensor, error) {
	return newTensor(ctx, alloc, spec.DType, spec.Shape, spec.Kind, 1)
}

// newTensor does the work of New; skip counts the frames between the caller
// to record and newTensor, newTensor excluded. The spec comes in as separate
// arguments so that escape analysis sees that shape is only copied: a
// variadic dims slice then stays on the caller's stack.
//
//go:noinline
func newTensor(ctx context.Context, alloc Allocator, dt DType, shape Shape, kind string, skip int) (*Tensor, error) {
	if nilAllocator(alloc) {
		return nil, ErrNilAllocator
	}
	var err error
	bytes, ok := shape.smallBytes(dt) // inlined: Bytes is not
	if !ok {
		if bytes, err = shape.Bytes(dt); err != nil {
			return nil, err
		}
	}
	if kind == "" {
		kind = DefaultKind
	}
	tr := alloc.Tracker()
	var o *ownedTensor // an untracked tensor: handle and block in one
	var tb *trackedBlock
	var b *block
	var t *Tensor
	if tr == nil {
		o = &ownedTensor{own: Tensor{inline: true}, bytes: bytes}
		b, t = &o.b, &o.own
	} else {
		tb = &trackedBlock{block: block{tracked: true}}
		tb.rec.Bytes = bytes
		b = &tb.block
		t = &Tensor{b: b}
	}
	b.alloc, b.dtype = alloc, dt
	if bytes > 0 {
		if ca, ok := alloc.(ContextAllocator); ok {
			b.mem, err = ca.AllocateContext(ctx, bytes)
		} else {
			b.mem, err = alloc.Allocate(bytes)
		}
		if err != nil {
			if tr != nil && errors.Is(err, ErrOutOfMemory) {
				// The device counts the refusal too: a watcher reads it as
				// the fact that the memory its suspects draw from ran out.
				device, _ := allocDeviceName(tr, alloc, Block{}, 0) // nothing allocated to give back
				tr.Books().NoteOutOfMemory(device, tr.Books().Caller(skip+1, 32), bytes)
			}
			return nil, err
		}
	}
	name, own := ownDeviceName(alloc)
	if !own {
		name, err = allocDeviceName(tr, alloc, b.mem, bytes) // foreign code, under recover (guard.go)
	}
	if err != nil {
		if bytes > 0 {
			err = errors.Join(err, alloc.Release(b.mem))
		}
		return nil, err
	}
	// The shape is copied here, once per distinct value: shared after.
	meta := internMeta(kind, name, dt, shape)
	if o != nil {
		o.meta = meta
		if bytes > 0 {
			runtime.SetFinalizer(o, (*ownedTensor).collected)
		}
		return t, nil
	}
	tb.rec.Meta = meta
	if err := tr.Books().Record(ctx, &tb.rec, skip+1); err != nil {
		if bytes > 0 {
			err = errors.Join(err, alloc.Release(b.mem))
		}
		return nil, err
	}
	runtime.SetFinalizer(t, (*Tensor).dropped)
	if heapfence.RetainersOn() {
		noteHandle(t)
	}
	return t, nil
}

// nilAllocator is invariants.IsNil for New's allocator, without its
// reflect.Value for the allocator nearly every call passes, a non-nil
// pointer: an interface holding a pointer holds it as its data word, so a
// data word that is not nil with a type of kind Pointer is a non-nil
// pointer. Anything else (a nil pointer, a map, a func, a nil slice boxed
// behind a non-nil data word) is IsNil's to judge.
func nilAllocator(alloc Allocator) bool {
	if alloc == nil {
		return true
	}
	if words := (*[2]unsafe.Pointer)(unsafe.Pointer(&alloc)); words[1] != nil && reflect.TypeOf(alloc).Kind() == reflect.Pointer {
		return false
	}
	return invariants.IsNil(alloc)
}

// newHandle makes a further handle on b, with a finalizer that reports it
// if it is dropped without Free and gives its ownership up.
func newHandle(b *block, site *track.Site, view *window, how uint8) *Tensor {
	var x *handleExt
	if view != nil {
		x = &handleExt{view: view} // shared with the handle it was retained from
	}
	return newHandleExt(b, site, x, how)
}

// newHandleExt is newHandle with the handle's ext made by the caller.
func newHandleExt(b *block, site *track.Site, x *handleExt, how uint8) *Tensor {
	t := &Tensor{b: b, site: site, ext: x, how: how}
	runtime.SetFinalizer(t, (*Tensor).dropped)
	if heapfence.RetainersOn() {
		noteHandle(t)
	}
	return t
}

// tracker returns the tracker that recorded the tensor; nil if untracked.
func (b *block) tracker() *track.Tracker {
	if !b.tracked {
		return nil
	}
	return (*trackedBlock)(unsafe.Pointer(b)).rec.Tracker()
}

// dropped runs when a handle other than an untracked tensor's own became
// unreachable without Free: its tracker reports it, at the line that made
// it, and it gives its ownership up unless the tracker keeps leaks. A freed
// handle never gets here: Free takes the finalizer off right after marking
// the handle freed, while the handle is still reachable.
func (t *Tensor) dropped() {
	if t.ext != nil {
		t.ext.borrow.Return() // dropped: the collector's report names it now
	}
	dropHandle(t.b, t.site, t.how, weak.Pointer[track.Owner]{})
}

// dropHandle reports a handle of b made at site by how that became
// unreachable without Free, whose owner's hold (heldFor, zero if none)
// ends with it, and gives its ownership up unless the tracker keeps leaks.
func dropHandle(b *block, site *track.Site, how uint8, heldFor weak.Pointer[track.Owner]) {
	if r := b.record(); r != nil && r.Tracker() != nil {
		if heldFor != (weak.Pointer[track.Owner]{}) {
			_ = r.HandBackDropped(heldFor) // the owner let go by dropping its handle
		}
		if !r.ReportDropped(site, howName(how)) {
			return // the tracker keeps the memory; the handle is counted dropped
		}
	}
	_ = b.unref(true, nil) // nobody is left to hand an error to; the tracker counted the leak
}

// unref drops one owner, returning the memory with the last; gc says the
// owner is a handle the garbage collector found dropped (see release);
// with later set, the memory's release is added to it instead of run.
func (b *block) unref(gc bool, later *Releases) error {
	// With no other owner, nobody else can change the count: no atomic
	// read-modify-write is needed to know this is the last.
	if b.extra.Load() != 0 && b.extra.Add(-1) >= 0 {
		return nil
	}
	if !b.tracked && ownerOf(b).bytes > 0 {
		runtime.SetFinalizer(ownerOf(b), nil) // nothing left for it to give back
	}
	return b.release(gc, later)
}

// release gives the record and the memory back. With gc set it runs on the
// runtime's finalizer or cleanup goroutine, where no part's code may run
// (see release.go): the record leaves the tracker here, and the memory is
// queued for a releaser, which gives it back (ReleaseDropped for a
// DroppedReleaser, tensor/foreign's). With later set, the memory's
// release is added to it, for the caller to run (Releases.Run).
func (b *block) release(gc bool, later *Releases) error {
	var err error
	if r := b.record(); r != nil && r.Tracker() != nil {
		err = r.Release()
	}
	if b.bytes() > 0 {
		if gc {
			releases.push(b)
			return err
		}
		if later != nil {
			later.blocks = append(later.blocks, b)
			return err
		}
		err = join(err, b.alloc.Release(b.mem))
	}
	return err
}

// join is errors.Join of two errors, without a call for the common case,
// where the first is nil: then it is the second as it is.
func join(err, next error) error {
	if err == nil {
		return next
	}
	return errors.Join(err, next)
}

// Free gives up this handle's ownership; the memory returns to its allocator
// when the last owner frees. A second Free of the same handle returns a
// *DoubleFreeError (matching ErrDoubleFree) and is counted by the tracker;
// built with the tensorlife_invariants tag, it panics instead.
//
//go:noinline
func (t *Tensor) Free() error { return t.free(nil) }

// FreeInto is Free, except that when this was the last owner the memory's
// return to its allocator (a call into the allocator, and maybe into its
// device) is added to r instead of made: the handle, the record and the
// owner's books change now, and the memory goes back at r.Run. A holder
// that frees under a lock its readers need (a cache evicting) frees into
// a Releases and runs it after unlocking, so that no device call is made
// under the lock.
//
//go:noinline
func (t *Tensor) FreeInto(r *Releases) error { return t.free(r) }

// free is Free and FreeInto, which call it directly: the line that freed
// is two frames up. later is as for unref.
//
//go:noinline
func (t *Tensor) free(later *Releases) error {
	if t == nil {
		return ErrFreed
	}
	b := t.blk()
	if b == nil {
		return ErrFreed
	}
	if !t.state.CompareAndSwap(0, freedUnknown) {
		return t.doubleFree()
	}
	x := t.ext
	switch {
	case x != nil && x.ticket != nil:
		x.cleanup.Stop()
	case !t.inline:
		runtime.SetFinalizer(t, nil) // an ownedTensor's goes with its last owner
	}
	var err error
	if tr := b.tracker(); tr != nil {
		// The line names the first free in a misuse report: a short
		// capture, numbered once per distinct line, keeps Free cheap.
		t.state.Store(freedUnknown + tr.Books().FreeLine(2)) // from Free's caller
		r := b.record()
		r.Unhold(t.site, howName(t.how))
		if x != nil {
			x.borrow.Return() // freed: no longer its request's, or outlived
			x.borrow = nil
		}
		if x != nil && x.owner != nil { // the owner lets go with its handle
			err = r.HandBack(x.owner)
		}
	}
	if x != nil {
		x.owner = nil
	}
	return join(err, b.unref(false, later))
}

// A freed handle's state is freedUnknown plus the number of the line that
// freed it (track.Books.FreeLine), 0 for a line not kept.
const freedUnknown uint32 = 1

//go:noinline
func (t *Tensor) doubleFree() error {
	b := t.blk()
	err := &DoubleFreeError{ID: b.ident(), DType: b.dtype, Shape: t.shapeRef(), Bytes: t.Bytes()}
	if tr := b.tracker(); tr != nil {
		m := t.misuse(tr, track.EventDoubleFree)
		err.Allocated, err.FirstFree, err.FirstDeferred = m.Allocated, m.FirstFree, m.FirstDeferred
		// The second Free's line, where the history event puts it, named
		// as the first free is.
		m.SecondFree, m.SecondDeferred = tr.Books().FreeSite(tr.Books().FreeLine(3))
		err.SecondFree, err.SecondDeferred = m.SecondFree, m.SecondDeferred
		b.record().NoteMisuse(m)
	}
	if invariants.Enabled {
		panic(err)
	}
	return err
}

// Retain returns a new handle that owns the same memory: the memory stays
// until both handles are freed. A cache that keeps a tensor a request also
// uses holds its own handle this way. The new handle remembers the line that
// called Retain.
//
//go:noinline
func (t *Tensor) Retain() (*Tensor, error) { return t.retain(howRetain) }

// RetainContext is Retain for a handle taken under ctx's request, such as
// a cache hit the request uses (mask.Cache.GetOrBuild takes its handles so):
// the handle is the request's to free. If the request ends while the handle
// is held, the handle has outlived it, and a growth watcher names the line
// that took it at its next window, even while other handles (the cache's)
// keep the memory: free it before the request ends, or hand it to an owner
// (HandTo). Under no request it is Retain.
//
//go:noinline
func (t *Tensor) RetainContext(ctx context.Context) (*Tensor, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	b := t.blk()
	b.extra.Add(1)
	tr := b.tracker()
	if tr == nil {
		return newHandle(b, nil, t.viewOf(), howRetain), nil
	}
	site := tr.Books().CallerSite(1) // RetainContext's caller
	x := &handleExt{view: t.viewOf(), borrow: b.record().HoldUnder(ctx, site, howName(howRetain))}
	return newHandleExt(b, site, x, howRetain), nil
}

// RetainFor is Retain for a named owner, such as a cache: reports name the
// handle by owner ("held by a mask cache entry made at ..."), so that the
// memory a cache keeps is not taken for a Retain someone forgot to free. An
// empty owner is Retain. At most 64 owner names are told apart in a
// process; further ones are reported as Retain.
//
//go:noinline
func (t *Tensor) RetainFor(owner string) (*Tensor, error) {
	how := howRetain
	if owner != "" {
		how = ownerIndex(owner)
	}
	return t.retain(how)
}

// retain makes the new owner for Retain and RetainFor, whose caller is the
// line the handle remembers.
//
//go:noinline
func (t *Tensor) retain(how uint8) (*Tensor, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	b := t.blk()
	b.extra.Add(1)
	return newHandle(b, t.holdSite(how, 3), t.viewOf(), how), nil
}

// holdSite captures the line skip frames above holdSite's caller (the
// caller of Retain or View) and counts the new handle as a holder of the
// record.
//
//go:noinline
func (t *Tensor) holdSite(how uint8, skip int) *track.Site {
	b := t.blk()
	tr := b.tracker()
	if tr == nil {
		return nil
	}
	site := tr.Books().CallerSite(skip)
	b.record().Hold(site, howName(how))
	return site
}

// View returns a new handle on part of this one's memory: shape dims,
// starting offset elements in, same dtype, contiguous. Like Retain, the view
// is an owner that must be freed, so memory a view still uses is never
// returned. A growing mask hands out views of exactly its current length
// this way, over one allocation. The view remembers the line that called
// View.
//
//go:noinline
func (t *Tensor) View(offset int, dims ...int) (*Tensor, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	b := t.blk()
	shape := Shape(dims)
	bytes, err := shape.Bytes(b.dtype)
	if err != nil {
		return nil, err
	}
	size := int64(b.dtype.Size())
	// Check the offset before multiplying, so that no offset wraps around.
	if offset < 0 || int64(offset) > t.Bytes()/size || bytes > t.Bytes()-int64(offset)*size {
		return nil, fmt.Errorf("%w: view %v at element %d of %v", ErrSizeMismatch, shape, offset, t)
	}
	b.extra.Add(1)
	// The view's window and the handle's ext in one allocation.
	v := &struct {
		x handleExt
		w window
	}{w: window{off: t.offset() + int64(offset)*size, bytes: bytes, shape: shape.Clone()}}
	v.x.view = &v.w
	return newHandleExt(b, t.holdSite(howView, 2), &v.x, howView), nil
}

// check returns ErrFreed for a freed handle and notes the use to the
// tracker as misuse, with the line of the use (the caller of the method
// that called check).
func (t *Tensor) check() error {
	if t == nil || t.blk() == nil {
		return ErrFreed
	}
	if t.state.Load() != 0 {
		t.useAfterFree()
		return ErrFreed
	}
	return nil
}

// useAfterFree notes a use of a freed handle. Misuse is rare: the use's
// stack is captured with runtime.Callers, deep enough to reach past
// tensorlife's frames.
//
//go:noinline
func (t *Tensor) useAfterFree() {
	tr := t.blk().tracker()
	if tr == nil {
		return
	}
	m := t.misuse(tr, track.EventUseAfterFree)
	m.Use = tr.Books().Caller(2, 16)
	t.blk().record().NoteMisuse(m)
}

// misuse describes a misuse of kind of this freed handle, which tr
// recorded: the tensor, where it was made and where it was first freed.
// The caller adds the line of the misuse.
func (t *Tensor) misuse(tr *track.Tracker, kind track.EventKind) track.Misuse {
	m := track.Misuse{Kind: kind, Allocated: t.blk().record().Site()}
	m.FirstFree, m.FirstDeferred = tr.Books().FreeSite(t.state.Load() - freedUnknown)
	return m
}

// offset is the handle's first byte in its block.
func (t *Tensor) offset() int64 {
	if v := t.viewOf(); v != nil {
		return v.off
	}
	return 0
}

// shapeRef is the handle's shape, shared: callers must not modify it.
func (t *Tensor) shapeRef() Shape {
	if v := t.viewOf(); v != nil {
		return v.shape
	}
	if m := t.blk().meta(); m != nil {
		return m.Shape
	}
	return nil
}

// Freed reports whether Free has been called on this handle.
func (t *Tensor) Freed() bool { return t == nil || t.blk() == nil || t.state.Load() != 0 }

// ID returns the tensor's id: its record id in its tracker, or a
// process-wide counter for untracked tensors. Handles from Retain share it.
func (t *Tensor) ID() uint64 { return t.blk().ident() }

// DType returns the element type.
func (t *Tensor) DType() DType { return t.blk().dtype }

// Shape returns a copy of the dimensions.
func (t *Tensor) Shape() Shape { return t.shapeRef().Clone() }

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shapeRef()) }

// Dim returns dimension i, or -1 if i is out of range.
func (t *Tensor) Dim(i int) int {
	shape := t.shapeRef()
	if i < 0 || i >= len(shape) {
		return -1
	}
	return shape[i]
}

// Bytes returns the tensor's size in bytes (not the allocator's rounding).
func (t *Tensor) Bytes() int64 {
	if v := t.viewOf(); v != nil {
		return v.bytes
	}
	return t.blk().bytes()
}

// HeldBytes returns the bytes of device memory this handle keeps alive:
// Bytes for a tensor, the whole parent allocation for a View. A cache that
// bounds what it holds counts these.
func (t *Tensor) HeldBytes() int64 { return t.blk().bytes() }

// Kind returns the kind the tensor was made with.
func (t *Tensor) Kind() string {
	if m := t.blk().meta(); m != nil {
		return m.Kind
	}
	return ""
}

// Device returns the device the memory is on.
func (t *Tensor) Device() Device { return t.blk().alloc.Device() }

// Allocator returns the allocator the memory came from.
func (t *Tensor) Allocator() Allocator { return t.blk().alloc }

// Site returns the call site that made the tensor; nil if untracked.
func (t *Tensor) Site() *track.Site {
	b := t.blk()
	if b.tracker() == nil {
		return nil
	}
	return b.record().Site()
}

// HandleSite returns the call site that made this handle: the allocation's
// site for the handle New returned, the line that called Retain or View for
// the others; nil if untracked. It is the line a leak report names when this
// handle is the one still holding the memory.
func (t *Tensor) HandleSite() *track.Site {
	b := t.blk()
	switch {
	case b.tracker() == nil:
		return nil
	case t.site != nil:
		return t.site
	default:
		return b.record().Site()
	}
}

// Labels returns the labels the tensor was made under.
func (t *Tensor) Labels() track.Labels {
	if r := t.blk().record(); r != nil {
		return r.Labels()
	}
	return track.Labels{}
}

// Ptr returns the device address of the first byte; 0 for an empty tensor.
// The address is valid while the handle is owned and reachable: keep t
// alive (runtime.KeepAlive) until a kernel using it is done, or a handle
// dropped meanwhile may be reclaimed as a leak.
func (t *Tensor) Ptr() (DevicePtr, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	if t.Bytes() == 0 {
		return 0, nil
	}
	return t.blk().mem.Ptr.Add(t.offset()), nil
}

// String describes the tensor: "tensor 7 float32[2 3] on host (24 B)".
func (t *Tensor) String() string {
	b := t.blk()
	s := fmt.Sprintf("tensor %d %v%v on %s (%s)", b.ident(), b.dtype, t.shapeRef(), t.Device().Name(), format.Bytes(t.Bytes()))
	if t.Freed() {
		s += " freed"
	}
	return s
}

// DoubleFreeError reports a second Free of one handle.
type DoubleFreeError struct {
	ID         uint64
	DType      DType
	Shape      Shape
	Bytes      int64
	Allocated  *track.Site // where the tensor was made; nil if untracked
	FirstFree  *track.Site // where it was first freed; nil if untracked
	SecondFree *track.Site // where it was freed again; nil if untracked
	// FirstDeferred and SecondDeferred say that Free ran from a defer
	// statement, whose line its site names (with frame-pointer capture).
	FirstDeferred  bool
	SecondDeferred bool
}

func (e *DoubleFreeError) Error() string {
	return fmt.Sprintf("tensor: double free of tensor %d (%v%v, %s): allocated at %s; first freed%s at %s; freed again%s at %s",
		e.ID, e.DType, e.Shape, format.Bytes(e.Bytes), siteString(e.Allocated),
		deferredWord(e.FirstDeferred), siteString(e.FirstFree), deferredWord(e.SecondDeferred), siteString(e.SecondFree))
}

// deferredWord marks a Free that ran from a defer statement.
func deferredWord(deferred bool) string {
	if deferred {
		return " by a deferred Free"
	}
	return ""
}

// Is reports whether target is ErrDoubleFree.
func (e *DoubleFreeError) Is(target error) bool { return target == ErrDoubleFree }

func siteString(s *track.Site) string {
	if s == nil {
		return "unknown site (untracked allocator)"
	}
	return s.String()
}
