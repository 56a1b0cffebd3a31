package gorgoniatrack

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
	"weak"

	gorgonia "gorgonia.org/tensor"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// Kind is the kind every tensor an Engine allocates is recorded with
// (tensor.Spec.Kind), so that reports, profiles and metrics show gorgonia's
// memory apart from the service's other tensors.
const Kind = "gorgonia"

// ErrNotHostMemory means an allocator's device keeps its memory where host
// code cannot read it (a GPU): a Dense over it would dereference device
// addresses. NewEngine refuses such an allocator with it.
var ErrNotHostMemory = errors.New("gorgoniatrack: device memory is not host memory")

// Engine is a gorgonia.org/tensor Engine whose every allocation is a
// tracked tensor drawn from a tensorlife allocator (a *pool.Pool or a
// tensor.DeviceAllocator), recorded with the line that asked for it and the
// labels and request of the engine's context (For). Its Free returns the
// memory. Besides the Engine methods it runs gorgonia's standard
// arithmetic, comparisons, reductions and shape operations (those of
// gorgonia's StdEng) on that memory.
//
// The engines that For returns share one table of live allocations, so any
// of them frees what another allocated. An Engine is safe for concurrent
// use; a Dense is not, as in gorgonia.
type Engine struct {
	// stdOps runs gorgonia's operations; see stdOps.
	stdOps
	ctx  context.Context
	live *liveTable
	// held is the handle of the one Dense a constructor made with this
	// engine (nil for the others): the Dense keeps it alive through its
	// engine, so that a Dense dropped without Free drops its handle, which
	// package tensor reports (see the package doc).
	held *tensor.Tensor
}

// adapterPackages are the packages an Engine records through: gorgonia and
// this adapter. A site names the first frame outside them, on any tracker.
var adapterPackages = sync.OnceValue(func() error {
	return track.AdapterPackages("gorgonia.org/tensor.", "gorgonia.org/tensor/",
		"github.com/tensorlife/tensorlife/contrib/gorgoniatrack.")
})

// NewEngine returns an engine that allocates from alloc, under
// context.Background() (For binds a request's context). It marks gorgonia's
// packages and this one as the library code a site skips
// (track.AdapterPackages), so that every Dense is named at the line that
// called gorgonia, on any tracker. alloc's device must
// be host memory (tensor.HostMemory, as tensor.HostDevice is): an allocator
// on a GPU is refused with an error matching ErrNotHostMemory.
func NewEngine(alloc tensor.Allocator) (*Engine, error) {
	if err := adapterPackages(); err != nil {
		return nil, err
	}
	if alloc == nil {
		return nil, fmt.Errorf("%w: gorgoniatrack.NewEngine(nil)", tensor.ErrNilAllocator)
	}
	dev := alloc.Device()
	host, ok := dev.(tensor.HostMemory)
	if !ok {
		name := "nil"
		if dev != nil {
			name = dev.Name()
		}
		return nil, fmt.Errorf("%w: device %s (%T) does not implement tensor.HostMemory; gorgonia's Dense reads and writes its memory on the host",
			ErrNotHostMemory, name, dev)
	}
	live := &liveTable{allocator: alloc, host: host}
	for i := range live.shards {
		live.shards[i].m = make(map[uintptr]*block)
	}
	return &Engine{stdOps: gorgonia.StdEng{}, ctx: context.Background(), live: live}, nil
}

// For returns an engine that allocates under ctx: every tensor it (and
// every Dense made with it, and gorgonia's results of operations on those)
// allocates carries ctx's labels and belongs to ctx's request, as if made
// with tensor.New(ctx, ...). Gorgonia passes no context to an engine, so
// a request reaches it this way: eng.For(ctx) in the handler, passed to
// gorgonia.WithEngine. It shares e's allocator and live table. A nil ctx
// means context.Background().
func (e *Engine) For(ctx context.Context) *Engine {
	if ctx == nil {
		ctx = context.Background()
	}
	return &Engine{stdOps: e.stdOps, ctx: ctx, live: e.live}
}

// Allocator returns the allocator the engine draws from.
func (e *Engine) Allocator() tensor.Allocator { return e.live.allocator }

// Live returns the number of allocations the engine's table holds: those
// not yet freed, and those of Denses dropped whose handle the collector has
// not yet taken. It is a figure for tests and reports; the tracker's live
// set is the exact one.
func (e *Engine) Live() int {
	n := 0
	for i := range e.live.shards {
		s := &e.live.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// AllocAccessible reports true: the memory is host memory, which Go code
// reads in place.
func (e *Engine) AllocAccessible() bool { return true }

// Alloc allocates size bytes as a tracked tensor under the engine's
// context, recorded as uint8[size] of kind Kind, and zeroes it, as
// gorgonia's own engine does. gorgonia calls it for
// every Dense made WithEngine(e) and every result it makes from one; it
// keeps only the address. A zero size returns empty memory that holds
// nothing and needs no Free. The error is the allocator's: an
// *tensor.OOMError when the budget is spent (on which gorgonia panics; see
// the package doc).
func (e *Engine) Alloc(size int64) (gorgonia.Memory, error) {
	if size == 0 {
		return emptyMemory{}, nil
	}
	if size < 0 {
		return nil, fmt.Errorf("%w: gorgoniatrack: allocate %d bytes", tensor.ErrInvalidSize, size)
	}
	return e.live.alloc(e.ctx, tensor.Spec{Kind: Kind}, size, true)
}

// Free frees the allocation at mem's address (a Dense, or what Alloc
// returned), of size bytes: its tensor's ownership is given up and the
// memory returns to the allocator. Memory the engine's table does not hold
// (never allocated by it, freed already, or a view of a Dense) is an error
// matching tensor.ErrInvalidPointer; a size other than the allocation's is
// an error matching tensor.ErrSizeMismatch, and frees nothing. Empty memory
// frees nothing and succeeds. What Alloc returned, freed a second time, is
// an error matching tensor.ErrDoubleFree, and frees nothing. A Dense must
// not be used after its Free: its memory may be another's by then.
func (e *Engine) Free(mem gorgonia.Memory, size int64) error {
	if mem == nil {
		return fmt.Errorf("%w: gorgoniatrack: Free(nil)", tensor.ErrInvalidPointer)
	}
	b, _ := mem.(*block)
	if b != nil && b.freed {
		return fmt.Errorf("%w: gorgoniatrack: Free of memory Alloc returned, freed already", tensor.ErrDoubleFree)
	}
	if mem.MemSize() == 0 {
		return nil // empty memory: gorgonia's Uintptr would index it
	}
	return e.live.free(mem.Uintptr(), size, b)
}

// Memset sets every element of mem (a Dense) to val, as gorgonia's StdEng.
func (e *Engine) Memset(mem gorgonia.Memory, val interface{}) error {
	return gorgonia.StdEng{}.Memset(mem, val)
}

// Memclr zeroes mem: a Dense, or what Alloc returned.
func (e *Engine) Memclr(mem gorgonia.Memory) {
	if b, ok := mem.(*block); ok {
		clear(b.mem)
		return
	}
	gorgonia.StdEng{}.Memclr(mem)
}

// Memcpy copies src to dst (Denses), as gorgonia's StdEng.
func (e *Engine) Memcpy(dst, src gorgonia.Memory) error { return gorgonia.StdEng{}.Memcpy(dst, src) }

// Accessible returns mem: host memory is accessible as it is.
func (e *Engine) Accessible(mem gorgonia.Memory) (gorgonia.Memory, error) { return mem, nil }

// WorksWith reports true for every data order, as gorgonia's StdEng.
func (e *Engine) WorksWith(order gorgonia.DataOrder) bool { return true }

// String names the engine and its allocator's device, for gorgonia's
// messages.
func (e *Engine) String() string {
	return "gorgoniatrack.Engine on " + e.live.host.Name()
}

// liveTable maps the address of every live allocation of an engine (and of
// the engines For made from it) to its block. gorgonia hands back only an
// address (a Dense is a gorgonia.Memory by its Uintptr), so Free finds the
// tensor here. It is sharded by address so that goroutines allocating at
// once rarely share a lock: 64 shards, as the tracker's records are.
type liveTable struct {
	allocator tensor.Allocator
	host      tensor.HostMemory
	shards    [liveShards]liveShard
}

const liveShards = 64

type liveShard struct {
	mu sync.Mutex
	m  map[uintptr]*block
	_  [64 - unsafe.Sizeof(sync.Mutex{}) - unsafe.Sizeof(map[uintptr]*block(nil))]byte // a shard a cache line
}

func (l *liveTable) shard(addr uintptr) *liveShard {
	// Fibonacci hashing of the address: blocks are aligned, so their low
	// bits say nothing.
	return &l.shards[(uint64(addr)*0x9E3779B97F4A7C15)>>(64-6)]
}

// block is one live allocation: the tensor that owns it and its memory as
// Go sees it. It is also the gorgonia.Memory that Alloc returns.
type block struct {
	// handle owns the memory while the table holds it: strongly (handle)
	// for memory gorgonia allocated, weakly (weakHandle) for a Dense's
	// whose engine holds the handle, so that dropping the Dense drops it.
	handle     *tensor.Tensor
	weakHandle weak.Pointer[tensor.Tensor]
	mem        []byte
	dims       [1]int // the shape an Alloc records: uint8[size]
	// freed marks a block freed through itself, the Memory Alloc returned,
	// which its caller still holds: it is never reused, so a second Free
	// of it is told apart from the Free of a newer allocation.
	freed bool
}

// Uintptr returns the address of the block's first byte.
func (b *block) Uintptr() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b.mem))) }

// MemSize returns the block's size in bytes.
func (b *block) MemSize() uintptr { return uintptr(len(b.mem)) }

// alloc makes a tensor of spec (bytes > 0 long; without a Shape, uint8
// [bytes]) under ctx and enters it in the table, zeroed unless the caller
// fills it: gorgonia's own memory is zeroed, and a pool hands out blocks
// that held other tensors.
func (l *liveTable) alloc(ctx context.Context, spec tensor.Spec, bytes int64, zero bool) (*block, error) {
	b := blocks.Get().(*block)
	if spec.Shape == nil {
		// The shape lives in the block: one allocation for both.
		b.dims[0] = int(bytes)
		spec.DType, spec.Shape = tensor.Uint8, b.dims[:]
	}
	t, err := tensor.Make(ctx, l.allocator, spec)
	if err != nil {
		blocks.Put(b)
		return nil, err
	}
	mem, err := l.hostBytes(t, bytes)
	if err != nil {
		blocks.Put(b)
		return nil, errors.Join(err, t.Free())
	}
	if zero {
		clear(mem)
	}
	b.handle, b.mem = t, mem
	addr := b.Uintptr()
	s := l.shard(addr)
	s.mu.Lock()
	s.m[addr] = b // a stale entry at addr (a dropped Dense's) is replaced
	s.mu.Unlock()
	return b, nil
}

// hostBytes returns t's memory as Go memory.
func (l *liveTable) hostBytes(t *tensor.Tensor, bytes int64) ([]byte, error) {
	p, err := t.Ptr()
	if err != nil {
		return nil, err
	}
	var mem []byte
	err = track.Guard(l.allocator.Tracker(), l.host, "HostBytes", func() {
		mem, err = l.host.HostBytes(p, bytes)
	})
	if err != nil {
		return nil, err
	}
	if int64(len(mem)) != bytes {
		return nil, fmt.Errorf("%w: gorgoniatrack: %T.HostBytes returned %d bytes for %d", tensor.ErrSizeMismatch, l.host, len(mem), bytes)
	}
	return mem, nil
}

// free frees the allocation at addr, of size bytes; via is the block the
// caller freed it through (the Memory Alloc returned), nil for a Dense.
func (l *liveTable) free(addr uintptr, size int64, via *block) error {
	s := l.shard(addr)
	s.mu.Lock()
	b := s.m[addr]
	if b == nil {
		s.mu.Unlock()
		return fmt.Errorf("%w: gorgoniatrack: %#x is no live allocation of this engine (freed already, a view, or another engine's)",
			tensor.ErrInvalidPointer, addr)
	}
	if int64(len(b.mem)) != size {
		s.mu.Unlock()
		return fmt.Errorf("%w: gorgoniatrack: Free of %d bytes at %#x, which holds %d", tensor.ErrSizeMismatch, size, addr, len(b.mem))
	}
	delete(s.m, addr)
	s.mu.Unlock()
	h := b.handle
	switch {
	case h == nil:
		h = b.weakHandle.Value()
	case via == b:
		// Its caller holds b still: b stays freed, never reused.
		*b = block{freed: true}
	default:
		// Never watched and freed by address (a Dense's Free), so nothing
		// refers to b but the Memory gorgonia was handed, which it
		// dropped (Dense.makeArray keeps only the address): b serves the
		// next allocation.
		*b = block{}
		blocks.Put(b)
	}
	if h == nil {
		// The Dense was dropped and found: package tensor reported and
		// settled its handle. A Dense still reachable cannot get here.
		return fmt.Errorf("%w: gorgoniatrack: %#x was dropped without Free and reported", tensor.ErrInvalidPointer, addr)
	}
	return h.Free()
}

// watch makes the table hold b's handle weakly and returns it, for the
// Dense's engine to hold; nil if the table no longer holds b, or holds it
// weakly already.
func (l *liveTable) watch(b *block) *tensor.Tensor {
	addr := b.Uintptr()
	s := l.shard(addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[addr] != b || b.handle == nil {
		return nil
	}
	h := b.handle
	b.weakHandle, b.handle = weak.Make(h), nil
	// When the collector takes the handle, its entry goes: the key is the
	// block, not the handle, which it must not keep alive.
	runtime.AddCleanup(h, func(k cleanupKey) { k.table.forget(k.block) }, cleanupKey{l, b})
	return h
}

type cleanupKey struct {
	table *liveTable
	block *block
}

// forget removes b's entry, if the table still holds b at its address.
func (l *liveTable) forget(b *block) {
	addr := b.Uintptr()
	s := l.shard(addr)
	s.mu.Lock()
	if s.m[addr] == b {
		delete(s.m, addr)
	}
	s.mu.Unlock()
}

// blocks recycles the blocks of freed allocations that were never watched,
// so that an allocation costs no Go allocation beyond the tensor's own.
var blocks = sync.Pool{New: func() any { return new(block) }}

// emptyMemory is what Alloc returns for zero bytes.
type emptyMemory struct{}

func (emptyMemory) Uintptr() uintptr { return 0 }
func (emptyMemory) MemSize() uintptr { return 0 }
