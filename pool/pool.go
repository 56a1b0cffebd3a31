package pool

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/counter"
	"github.com/tensorlife/tensorlife/internal/invariants"

	"github.com/tensorlife/tensorlife/internal/format"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// ErrActiveBlocks means Close found blocks still handed out: tensors that
// were never freed. The *ActiveBlocksError that matches it names their sites.
var ErrActiveBlocks = errors.New("pool: closed with active blocks")

// freeList is one size class: its idle blocks, most recently released last
// (reused first: its memory is most likely still in a device cache), and
// its slots without a block. Each class has its own lock, so allocations of
// different sizes never contend; the lock is held for a slice push or pop
// and a few compares. It also guards the fields of the class's slots.
type freeList struct {
	mu    sync.Mutex
	idle  []uint32 // slots of cached blocks
	empty []uint32 // slots whose block went back to the device
	hits  int64
}

// paddedList keeps each class on its own cache lines: no false sharing.
type paddedList struct {
	freeList
	_ [counter.CacheLine - unsafe.Sizeof(freeList{})%counter.CacheLine]byte
}

// Pool is a caching allocator over one tensor.Device: it implements
// tensor.Allocator, rounds each request up to a size class, keeps released
// blocks per class and hands them out again without asking the device, and
// refuses to hold more than its budget. Out-of-memory errors are
// *tensor.OOMError values naming the call sites that hold the memory.
//
// A Pool is safe for concurrent use: an allocation or release that the cache
// serves takes only its size class's lock and a few atomics. It must not be
// copied. Close it to return its memory; it does not free memory that tensors
// still hold.
type Pool struct {
	dev       tensor.Device
	tracker   *track.Tracker
	id        uint32
	budget    int64 // 0: none
	total     int64 // the device's total bytes at New; 0 if unknown
	maxCached int64 // < 0: no cap
	topSites  int
	onOOM     func(*tensor.OOMError) // OnOutOfMemory's hook; nil without it
	logger    *slog.Logger           // Logger's: where a panic of the hook is reported
	closed    atomic.Bool            // read on every call, written once: kept with the read-mostly fields

	// classes has one more entry than there are classes: hugeClass, whose
	// blocks are never cached but whose slots are reused like any other's.
	classes [numClasses + 1]paddedList

	// mu guards the slot table's growth: misses that find no empty slot.
	mu    sync.Mutex
	slots slotTable

	reserved     atomic.Int64   // bytes held from the device, including allocations in flight
	active       stripedCounter // bytes in blocks handed out
	deviceBlocks atomic.Int64   // blocks held from the device
	peakReserved atomic.Int64
	peakActive   atomic.Int64
	deviceAllocs atomic.Int64
	deviceFrees  atomic.Int64
	misses       atomic.Int64
	evictions    atomic.Int64
	ooms         atomic.Int64
	badReleases  atomic.Int64
	hookPanics   atomic.Int64 // panics recovered from OnOutOfMemory's hook
}

// New returns a Pool over dev. Options are validated here, against each
// other and against dev.MemInfo's total: an invalid one returns an error
// matching ErrInvalidOption, a nil dev one matching tensor.ErrNilAllocator.
func New(dev tensor.Device, opts ...Option) (*Pool, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: nil device", tensor.ErrNilAllocator)
	}
	cfg := defaultConfig()
	if err := invariants.ApplyOptions(&cfg, opts, Option.apply, ErrInvalidOption); err != nil {
		return nil, err
	}
	_, total, memErr := dev.MemInfo()
	if memErr != nil {
		total = 0
	}
	budget, err := cfg.resolve(total, memErr)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		dev:       dev,
		tracker:   cfg.tracker,
		id:        counter.NewAllocatorID(),
		budget:    budget,
		total:     total,
		maxCached: cfg.maxCached,
		topSites:  cfg.topSites,
		onOOM:     cfg.onOOM,
		logger:    cfg.logger,
	}
	// Count what the pool reserves as tensorlife's in the tracker's reports
	// and in other pools' out-of-memory errors (see track.Attach).
	track.Attach(p.tracker, p)
	return p, nil
}

// Device returns the device the pool allocates from.
func (p *Pool) Device() tensor.Device { return p.dev }

// Tracker returns the tracker tensors from the pool are recorded in; nil
// with Untracked.
func (p *Pool) Tracker() *track.Tracker { return p.tracker }

// Budget returns the pool's budget in bytes; 0 means none.
func (p *Pool) Budget() int64 { return p.budget }

// Allocate returns a block of at least bytes bytes, rounded up to its size
// class: a cached block of that class if there is one, a new device
// allocation otherwise. A new allocation that would take the pool past its
// budget, or that the device refuses for lack of memory, first returns every
// cached block to the device and tries once more (unless that cannot make
// room: see the package doc); if that fails too, the error is a
// *tensor.OOMError matching tensor.ErrOutOfMemory. Other device
// errors are returned as they are. After Close it returns an error matching
// tensor.ErrClosed.
func (p *Pool) Allocate(bytes int64) (tensor.Block, error) {
	if bytes <= 0 {
		return tensor.Block{}, fmt.Errorf("%w: allocate %d bytes", tensor.ErrInvalidSize, bytes)
	}
	if p.closed.Load() {
		return tensor.Block{}, fmt.Errorf("%w: pool on %s", tensor.ErrClosed, p.dev.Name())
	}
	c, size, ok := classOf(bytes)
	if !ok {
		return tensor.Block{}, fmt.Errorf("%w: allocate %d bytes: more than any device holds", tensor.ErrInvalidSize, bytes)
	}
	fl := &p.classes[c]
	fl.mu.Lock()
	if n := len(fl.idle); n > 0 {
		i := fl.idle[n-1]
		fl.idle = fl.idle[:n-1]
		fl.hits++
		b := p.slots.get(i).handOut(p.id, i)
		fl.mu.Unlock()
		p.active.add(c, size)
		return b, nil
	}
	fl.mu.Unlock()
	return p.allocateNew(c, size)
}

// allocateNew serves a miss: a new device block of size bytes for class c.
func (p *Pool) allocateNew(c int, size int64) (tensor.Block, error) {
	p.misses.Add(1)
	ptr, refused, err := p.deviceAlloc(size)
	if refused != "" {
		if !p.cacheCouldHelp(size, refused) {
			return tensor.Block{}, p.oomError(size, refused, err)
		}
		// What the cache holds may be what is missing: give it back and try
		// once more, as a caching allocator must before reporting OOM.
		p.evictions.Add(p.releaseCache())
		ptr, refused, err = p.deviceAlloc(size)
		if refused != "" {
			return tensor.Block{}, p.oomError(size, refused, err)
		}
	}
	if err != nil {
		return tensor.Block{}, err
	}

	i, s, err := p.emptySlot(c)
	if err != nil {
		freeErr := p.dev.Free(ptr, size)
		p.deviceFrees.Add(1)
		p.dropReserved(size)
		return tensor.Block{}, errors.Join(err, freeErr)
	}
	fl := &p.classes[c]
	fl.mu.Lock()
	s.ptr, s.size = ptr, size
	b := s.handOut(p.id, i)
	fl.mu.Unlock()
	p.active.add(c, size)
	// The peak of active bytes is sampled here and in Stats, off the hit
	// path: a peak reached only through cache hits between two samples is
	// missed (see the package doc).
	counter.RaisePeak(&p.peakActive, p.active.load())
	return b, nil
}

// emptySlot returns a slot of class c with no block: one of the class's
// empty slots, or a new one.
func (p *Pool) emptySlot(c int) (uint32, *slot, error) {
	fl := &p.classes[c]
	fl.mu.Lock()
	if n := len(fl.empty); n > 0 {
		i := fl.empty[n-1]
		fl.empty = fl.empty[:n-1]
		fl.mu.Unlock()
		return i, p.slots.get(i), nil
	}
	fl.mu.Unlock()

	p.mu.Lock()
	i, ok := p.slots.add()
	p.mu.Unlock()
	if !ok {
		return 0, nil, fmt.Errorf("%w: pool on %s holds %d blocks, its limit", tensor.ErrOutOfMemory, p.dev.Name(), maxSlots)
	}
	s := p.slots.get(i)
	fl.mu.Lock()
	s.class.Store(int32(c) + 1)
	fl.mu.Unlock()
	return i, s, nil
}

// cacheCouldHelp reports whether returning the cache to the device could
// make room for size bytes after refused. If not, the cache is kept: a
// request larger than the budget or the device, or one that the budget
// refuses even with nothing cached, fails without emptying it. A device
// refusal is otherwise always worth the retry: the device's free memory is
// shared with whatever else runs on it.
func (p *Pool) cacheCouldHelp(size int64, refused string) bool {
	if refused == "budget" {
		return size <= p.budget-p.active.load()
	}
	return p.total <= 0 || size <= p.total
}

// deviceAlloc reserves size bytes against the budget, then asks the device.
// refused is "budget" or "device" when memory ran out (err holds the
// device's error); other failures come back in err alone.
func (p *Pool) deviceAlloc(size int64) (ptr tensor.DevicePtr, refused string, err error) {
	// Reserve first, so concurrent misses cannot together pass the budget.
	for {
		r := p.reserved.Load()
		if p.budget > 0 && size > p.budget-r {
			return 0, "budget", nil
		}
		if p.reserved.CompareAndSwap(r, r+size) {
			counter.RaisePeak(&p.peakReserved, r+size)
			break
		}
	}
	ptr, err = p.dev.Alloc(size)
	if err != nil {
		p.reserved.Add(-size)
		if errors.Is(err, tensor.ErrOutOfMemory) {
			return 0, "device", err
		}
		return 0, "", err
	}
	p.deviceAllocs.Add(1)
	p.deviceBlocks.Add(1)
	return ptr, "", nil
}

// Release takes back a block from Allocate. A block of another allocator is
// refused with an error matching tensor.ErrForeignBlock. A block of this
// pool that is not handed out (released twice, or forged) is refused with an
// error matching tensor.ErrInvalidPointer and counted (Stats.BadReleases);
// with the tensorlife_invariants build tag it panics. See the package doc
// for what is caught.
//
// The block is cached for reuse unless the pool is closed, the block is
// larger than any class, or the cache is at MaxCachedBytes; then it goes
// back to the device, and a device error is returned (the pool stops
// counting the block either way).
func (p *Pool) Release(b tensor.Block) error {
	if uint32(b.Tag>>32) != p.id {
		return fmt.Errorf("%w: block %#x (%s) released to pool on %s", tensor.ErrForeignBlock,
			uintptr(b.Ptr), format.Bytes(b.Size), p.dev.Name())
	}
	low := uint32(b.Tag)
	i := low >> genBits
	s := p.slots.get(i)
	if s == nil {
		return p.badRelease(b, "it is not a block of this pool")
	}
	c := int(s.class.Load()) - 1
	if c < 0 {
		return p.badRelease(b, "it is not a block of this pool")
	}
	fl := &p.classes[c]
	fl.mu.Lock()
	if s.ptr != b.Ptr || s.size != b.Size || s.ptr == 0 {
		fl.mu.Unlock()
		return p.badRelease(b, "it is not a block of this pool")
	}
	if !s.out || s.gen&genMask != low&genMask {
		fl.mu.Unlock()
		return p.badRelease(b, "it was released already (a double release, or a stale copy of a block handed out again)")
	}
	s.out = false
	s.gen++
	p.active.add(c, -b.Size)
	// Close sets closed before it empties each class under its lock, so a
	// block is either cached before Close empties its class or not at all.
	if c < numClasses && !p.closed.Load() && p.cacheHasRoom() {
		fl.idle = append(fl.idle, i)
		fl.mu.Unlock()
		return nil
	}
	fl.mu.Unlock()
	if c < numClasses && !p.closed.Load() {
		p.evictions.Add(1)
	}
	return p.toDevice(c, i, s)
}

// cacheHasRoom reports whether a block just released (and no longer
// counted active) may stay cached. Reserved minus active bounds the cached
// bytes from above (allocations in flight count as reserved), so the cap
// is never exceeded; at worst a block that would have fit is freed.
func (p *Pool) cacheHasRoom() bool {
	return p.maxCached < 0 || p.reserved.Load()-p.active.load() <= p.maxCached
}

// badRelease reports a release of a block this pool did not hand out.
func (p *Pool) badRelease(b tensor.Block, why string) error {
	p.badReleases.Add(1)
	err := fmt.Errorf("%w: pool on %s refused block %#x (%s): %s", tensor.ErrInvalidPointer,
		p.dev.Name(), uintptr(b.Ptr), format.Bytes(b.Size), why)
	if invariants.Enabled {
		panic(err)
	}
	return err
}

// toDevice frees the block of slot i, of class c, which the caller took
// off the idle list or out of the hands of its last holder, and puts the
// slot on the class's empty list. The pool stops counting the block even
// if the device refuses the free: the block cannot be handed out again,
// and a free that may have half happened must not be retried.
func (p *Pool) toDevice(c int, i uint32, s *slot) error {
	fl := &p.classes[c]
	fl.mu.Lock()
	ptr, size := s.ptr, s.size
	s.ptr, s.size = 0, 0 // matches no block: stale copies are refused
	fl.mu.Unlock()

	err := p.dev.Free(ptr, size)
	p.deviceFrees.Add(1)
	p.dropReserved(size)
	fl.mu.Lock()
	fl.empty = append(fl.empty, i)
	fl.mu.Unlock()
	if err != nil {
		return fmt.Errorf("pool: returning %s block %#x to %s: %w", format.Bytes(size), uintptr(ptr), p.dev.Name(), err)
	}
	return nil
}

func (p *Pool) dropReserved(size int64) {
	p.reserved.Add(-size)
	p.deviceBlocks.Add(-1)
}

// releaseCache returns every cached block to the device and reports how
// many it returned. Device errors are dropped: the caller is about to retry
// an allocation or report OOM, and toDevice has already stopped counting the
// blocks. EmptyCache is the variant that reports them.
func (p *Pool) releaseCache() int64 {
	n, _ := p.drain()
	return n
}

// EmptyCache returns every cached block to the device. Blocks handed out
// are untouched. It returns the device's errors, joined; the pool stops
// counting a block whose free failed.
func (p *Pool) EmptyCache() error {
	_, err := p.drain()
	return err
}

func (p *Pool) drain() (int64, error) {
	var n int64
	var errs []error
	var batch []uint32
	for c := range numClasses {
		fl := &p.classes[c]
		fl.mu.Lock()
		batch = append(batch[:0], fl.idle...)
		fl.idle = fl.idle[:0]
		fl.mu.Unlock()
		// Device frees can be slow; the class lock is not held for them.
		for _, i := range batch {
			if err := p.toDevice(c, i, p.slots.get(i)); err != nil {
				errs = append(errs, err)
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}

// stripedCounter is a sum spread over cache lines, one stripe per size
// class modulo 16: goroutines working on different classes update
// different lines, where a single counter would bounce one line between
// every core on every hit (it tripled the cost of a hit on two cores).
// Reading sums 16 words. Each stripe takes two lines, since amd64's
// adjacent-line prefetcher moves lines in pairs.
type stripedCounter struct {
	stripes [16]struct {
		v atomic.Int64
		_ [2*counter.CacheLine - unsafe.Sizeof(atomic.Int64{})]byte
	}
}

func (c *stripedCounter) add(class int, delta int64) { c.stripes[class&15].v.Add(delta) }

func (c *stripedCounter) load() int64 {
	var sum int64
	for i := range c.stripes {
		sum += c.stripes[i].v.Load()
	}
	return sum
}

// A Pool is what tensor.New draws from and what its tracker counts as
// tensorlife's on its device.
var (
	_ tensor.Allocator = (*Pool)(nil)
	_ track.Reserver   = (*Pool)(nil)
)
