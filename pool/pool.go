package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/counter"
	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/internal/option"
	"github.com/tensorlife/tensorlife/internal/ownalloc"

	"github.com/tensorlife/tensorlife/internal/format"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// ErrActiveBlocks means Close found blocks still handed out: tensors that
// were never freed. The *ActiveBlocksError that matches it names their sites.
var ErrActiveBlocks = errors.New("pool: closed with active blocks")

// Pool is a caching allocator over one tensor.Device: it implements
// tensor.Allocator, rounds each request up to a size class, keeps released
// blocks per class and hands them out again without asking the device, and
// refuses to hold more than its budget. Out-of-memory errors are
// *tensor.OOMError values naming the call sites that hold the memory.
//
// A Pool is safe for concurrent use: an allocation or release that the cache
// serves takes one lock of its size class in its goroutine's shard and
// writes no cache line that other cores write (see Sharding in shard.go).
// It must not be copied. Close it to return its memory; it does not free memory that tensors
// still hold.
type Pool struct {
	ownMark   // its device's name, for tensor.New
	dev       tensor.Device
	name      string // dev.Name() at New
	tracker   *track.Tracker
	id        uint32
	budget    int64 // 0: none
	total     int64 // the device's total bytes at New; 0 if unknown
	maxCached int64 // < 0: no cap
	topSites  int
	onOOM     func(*tensor.OOMError) // OnOutOfMemory's hook; nil without it
	logger    *slog.Logger           // the tracker's (slog.Default() untracked): where a panic of the hook is reported
	closed    atomic.Bool            // read on every call, written once: kept with the read-mostly fields
	shardMask uint32                 // shards - 1, a power of two less one
	spread    atomic.Bool            // a class lock was found held: goroutines use their shards (shard.go)
	shards    [maxShards]atomic.Pointer[shard]
	shard0    *shard    // shards[0], made at New: every goroutine's until the pool spreads
	slots     slotTable // its directory is read on every call, written on growth only

	_ [counter.CacheLine]byte // the read-mostly fields above, the miss path's below

	// mu guards the slot table's growth: misses that find no empty slot.
	mu sync.Mutex

	reserved atomic.Int64 // bytes held from the device, including allocations in flight
	// committed is reserved plus promised: the one figure the budget
	// gates, so a miss and an admission racing each other see each other.
	committed atomic.Int64
	// promised is the bytes admissions reserve and have not drawn yet.
	promised atomic.Int64
	// admissions counts the open admissions: while 0, an allocation does
	// not look for one in its context.
	admissions atomic.Int64
	// reservations is the bytes the open admissions reserved, drawn or
	// not.
	reservations atomic.Int64
	admKinds     admitKinds
	deviceBlocks atomic.Int64 // blocks held from the device
	peakReserved atomic.Int64
	peakActive   atomic.Int64
	deviceAllocs atomic.Int64
	deviceFrees  atomic.Int64
	misses       atomic.Int64
	evictions    atomic.Int64
	ooms         atomic.Int64
	badReleases  atomic.Int64
	hookPanics   atomic.Int64 // panics recovered from OnOutOfMemory's hook

	// cached counts the bytes in idle blocks, kept only under a
	// MaxCachedBytes cap (maxCached >= 0): the cap is one figure for the
	// whole pool, so keeping it exact costs a shared atomic per hit and
	// release. Without a cap nothing on the warm path writes it.
	_      [counter.CacheLine]byte
	cached atomic.Int64
	_      [counter.CacheLine - unsafe.Sizeof(atomic.Int64{})]byte
}

// ownMark is the mark of an allocator of this module (internal/ownalloc):
// tensor.New takes the device's name from it.
type ownMark = ownalloc.Mark[tensor.Allocator]

// New returns a Pool over dev. Options are validated here, against each
// other and against dev.MemInfo's total: an invalid one returns an error
// matching ErrInvalidOption, a nil dev one matching tensor.ErrNilAllocator.
func New(dev tensor.Device, opts ...Option) (*Pool, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: nil device", tensor.ErrNilAllocator)
	}
	cfg := defaultConfig()
	if err := option.Apply(&cfg, opts, Option.apply, ErrInvalidOption); err != nil {
		return nil, err
	}
	name, err := deviceName(cfg.tracker, dev)
	if err != nil {
		return nil, err
	}
	_, total, memErr := deviceMemInfo(cfg.tracker, dev, name)
	if memErr != nil {
		total = 0
	}
	budget, err := cfg.resolve(total, memErr)
	if err != nil {
		return nil, err
	}
	p := &Pool{
		dev:       dev,
		name:      name,
		tracker:   cfg.tracker,
		id:        counter.NewAllocatorID(),
		budget:    budget,
		total:     total,
		maxCached: cfg.maxCached,
		topSites:  cfg.topSites,
		onOOM:     cfg.onOOM,
		logger:    slog.Default(),
		shardMask: uint32(shardCount() - 1),
	}
	if cfg.tracker != nil {
		p.logger = cfg.tracker.Logger()
	}
	p.ownMark = ownalloc.New[tensor.Allocator](p, name)
	p.shard0 = p.shard(0)
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
	return p.allocate(bytes, nil)
}

// AllocateContext is Allocate for a tensor made under ctx (the pool is a
// tensor.ContextAllocator): an allocation under a context Admit returned
// draws from that admission's reservation first, then from the free
// budget; one whose admission's context is done releases the reservation
// first.
func (p *Pool) AllocateContext(ctx context.Context, bytes int64) (tensor.Block, error) {
	var a *Admission
	if p.admissions.Load() > 0 {
		if a = admissionOf(ctx, p); a != nil && !a.open() {
			a = nil
		}
	}
	return p.allocate(bytes, a)
}

func (p *Pool) allocate(bytes int64, a *Admission) (tensor.Block, error) {
	if bytes <= 0 {
		return tensor.Block{}, fmt.Errorf("%w: allocate %d bytes", tensor.ErrInvalidSize, bytes)
	}
	if p.closed.Load() {
		return tensor.Block{}, fmt.Errorf("%w: pool on %s", tensor.ErrClosed, p.name)
	}
	c, size, ok := smallClassOf(bytes)
	if !ok {
		if c, size, ok = classOf(bytes); !ok {
			return tensor.Block{}, fmt.Errorf("%w: allocate %d bytes: more than any device holds", tensor.ErrInvalidSize, bytes)
		}
	}
	var h uint32 // the goroutine's shard: 0 until goroutines are seen to contend
	var block uint64
	sh := p.shard0
	if p.spread.Load() {
		block = stackBlock()
		hint, ok := goroutineHint(block)
		if !ok {
			hint = refreshHint(block)
		}
		h = hint & p.shardMask % maxShards
		// p.shard(h), which is past the inliner's budget.
		if sh = p.shards[h].Load(); sh == nil {
			sh = p.makeShard(h)
		}
	}
	cs := &sh.classes[c]
	if !cs.mu.TryLock() { // see lockContended
		h, sh, cs = p.lockHinted(h, sh, c, block)
	}
	if n := len(cs.idle); n > 0 {
		i := cs.idle[n-1]
		cs.idle = cs.idle[:n-1]
		return p.handOutCached(sh, cs, i, size, a), nil
	}
	cs.mu.Unlock()
	if c < numClasses {
		if b, ok := p.steal(h, sh, c, size, a); ok {
			return b, nil
		}
	}
	b, err := p.allocateNew(h, sh, c, size, a)
	if err != nil && a != nil && errors.Is(err, tensor.ErrOutOfMemory) {
		a.ranOut() // its kind reserves more at once
	}
	return b, err
}

// steal hands out an idle block of class c that a sibling of shard h
// caches, making it shard h's: the cache serves every shard before the
// device is asked. It visits each sibling's class lock once, on the way to
// a miss only.
func (p *Pool) steal(h uint32, sh *shard, c int, size int64, a *Admission) (tensor.Block, bool) {
	var i uint32
	found := false
	for k := uint32(1); k <= p.shardMask && !found; k++ {
		j := (h + k) & p.shardMask
		sib := p.shards[j].Load()
		if sib == nil {
			continue
		}
		cs := &sib.classes[c]
		cs.mu.Lock()
		if n := len(cs.idle); n > 0 {
			i = cs.idle[n-1]
			cs.idle = cs.idle[:n-1]
			// Re-homed under the old home's lock: a Release that read the
			// old home finds it changed once it holds that lock.
			p.slots.get(i).home.Store(home(h, c))
			found = true
		}
		cs.mu.Unlock()
	}
	if !found {
		return tensor.Block{}, false
	}
	cs := &sh.classes[c]
	cs.mu.Lock()
	return p.handOutCached(sh, cs, i, size, a), true
}

// handOutCached hands out the cached block of slot i, of size, from class
// cs of shard sh, drawing from a if it is not nil: what a hit and a steal
// share. Called with cs.mu held, which it releases.
func (p *Pool) handOutCached(sh *shard, cs *classShard, i uint32, size int64, a *Admission) tensor.Block {
	cs.hits++
	s := p.slots.get(i)
	b := s.handOut(p.id, i)
	if a != nil {
		s.adm, s.drawn = a, p.drawHit(a, size)
	}
	cs.mu.Unlock()
	sh.active.Add(size)
	p.uncache(size)
	if a != nil {
		a.use(size)
	}
	return b
}

// uncache counts size bytes out of the cache, under a cap.
func (p *Pool) uncache(size int64) {
	if p.maxCached >= 0 {
		p.cached.Add(-size)
	}
}

// allocateNew serves a miss of shard h: a new device block of size bytes
// for class c.
func (p *Pool) allocateNew(h uint32, sh *shard, c int, size int64, a *Admission) (tensor.Block, error) {
	p.misses.Add(1)
	var drawn int64 // of a's reservation: the gate counts it already
	if a != nil {
		drawn = a.draw(size)
	}
	// What the books took is given back by defer, on every way out: an
	// error, a device method's panic (an error by then) and a
	// runtime.Goexit inside one leave them as they were.
	const (
		drawnOnly = iota // a's draw is taken, no device block is held
		blockHeld        // the device block ptr is counted as the pool's
		handedOut        // the block is handed out: nothing to give back
	)
	state := drawnOnly
	defer func() {
		switch state {
		case drawnOnly:
			p.undraw(a, drawn)
		case blockHeld:
			p.deviceFrees.Add(1)
			p.dropReserved(size)
			p.refill(a, drawn)
		}
	}()
	ptr, refused, err := p.deviceAlloc(size, drawn)
	if refused != "" {
		if !p.cacheCouldHelp(size-drawn, refused) {
			return tensor.Block{}, p.oomError(size, refused, err)
		}
		// What the cache holds may be what is missing: give it back and try
		// once more, as a caching allocator must before reporting OOM.
		p.evictions.Add(p.releaseCache())
		ptr, refused, err = p.deviceAlloc(size, drawn)
		if refused != "" {
			return tensor.Block{}, p.oomError(size, refused, err)
		}
	}
	if err != nil {
		return tensor.Block{}, err
	}
	state = blockHeld

	i, s, err := p.emptySlot(h, c)
	if err != nil {
		return tensor.Block{}, errors.Join(err, p.devFree(ptr, size))
	}
	state = handedOut
	cs := &sh.classes[c]
	cs.mu.Lock()
	s.ptr, s.size = ptr, size
	b := s.handOut(p.id, i)
	if a != nil {
		s.adm, s.drawn = a, drawn
	}
	cs.mu.Unlock()
	if a != nil {
		a.use(size)
	}
	sh.active.Add(size)
	// The peak of active bytes is sampled here and in Stats, off the hit
	// path: a peak reached only through cache hits between two samples is
	// missed (see the package doc).
	counter.RaisePeak(&p.peakActive, p.activeBytes())
	return b, nil
}

// emptySlot returns a slot of class c with no block, homed in shard h:
// one of the class's empty slots in shard h or a sibling, or a new one.
func (p *Pool) emptySlot(h uint32, c int) (uint32, *slot, error) {
	for k := uint32(0); k <= p.shardMask; k++ {
		sh := p.shards[(h+k)&p.shardMask].Load()
		if sh == nil {
			continue
		}
		cs := &sh.classes[c]
		cs.mu.Lock()
		if n := len(cs.empty); n > 0 {
			i := cs.empty[n-1]
			cs.empty = cs.empty[:n-1]
			s := p.slots.get(i)
			s.home.Store(home(h, c)) // under the old home's lock, as steal does
			cs.mu.Unlock()
			return i, s, nil
		}
		cs.mu.Unlock()
	}

	p.mu.Lock()
	i, ok := p.slots.add()
	p.mu.Unlock()
	if !ok {
		return 0, nil, fmt.Errorf("%w: pool on %s holds %d blocks, its limit", tensor.ErrOutOfMemory, p.name, maxSlots)
	}
	s := p.slots.get(i)
	cs := &p.shard(h).classes[c]
	cs.mu.Lock()
	s.home.Store(home(h, c))
	cs.mu.Unlock()
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
		return size <= p.budget-p.activeBytes()-p.promised.Load()
	}
	return p.total <= 0 || size <= p.total
}

// deviceAlloc reserves size bytes against the budget, then asks the device;
// drawn of them an admission's reservation holds already, counted in
// committed (they move from promised to reserved). refused is "budget" or
// "device" when memory ran out (err holds the device's error); other
// failures come back in err alone. On failure drawn is still the
// admission's.
func (p *Pool) deviceAlloc(size, drawn int64) (ptr tensor.DevicePtr, refused string, err error) {
	// Reserve first, so concurrent misses and admissions cannot together
	// pass the budget.
	extra := size - drawn
	for {
		r := p.committed.Load()
		if p.budget > 0 && extra > p.budget-r {
			return 0, "budget", nil
		}
		if size > math.MaxInt64-r { // only a device that hands out more than exists gets here
			return 0, "device", fmt.Errorf("%w: pool on %s would hold more than 2^63-1 bytes", tensor.ErrOutOfMemory, p.name)
		}
		if p.committed.CompareAndSwap(r, r+extra) {
			break
		}
	}
	p.promised.Add(-drawn)
	counter.RaisePeak(&p.peakReserved, p.reserved.Add(size))
	// Taken back by defer: a device Alloc that fails, panics or calls
	// runtime.Goexit leaves the budget as it was.
	made := false
	defer func() {
		if !made {
			p.reserved.Add(-size)
			p.promised.Add(drawn)
			p.committed.Add(-extra)
		}
	}()
	ptr, err = p.devAlloc(size)
	if err != nil {
		if errors.Is(err, tensor.ErrOutOfMemory) {
			return 0, "device", err
		}
		return 0, "", err
	}
	made = true
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
			uintptr(b.Ptr), format.Bytes(b.Size), p.name)
	}
	low := uint32(b.Tag)
	i := low >> genBits
	s := p.slots.get(i)
	if s == nil {
		return p.badRelease(b, "it is not a block of this pool")
	}
	// The slot's home may change (a sibling steals it) only while it is
	// idle, under the old home's lock: read it, lock, and check it again.
	var hm uint32
	var sh *shard
	var cs *classShard
	for {
		hm = s.home.Load()
		if hm == 0 {
			return p.badRelease(b, "it is not a block of this pool")
		}
		sh = p.shards[homeShard(hm)%maxShards].Load() // in range: no bounds check
		cs = &sh.classes[homeClass(hm)]
		if !cs.mu.TryLock() { // see lockContended
			p.lockContended(cs)
		}
		if s.home.Load() == hm {
			break
		}
		cs.mu.Unlock()
	}
	h, c := homeShard(hm), homeClass(hm)
	if s.ptr != b.Ptr || s.size != b.Size || s.ptr == 0 {
		cs.mu.Unlock()
		return p.badRelease(b, "it is not a block of this pool")
	}
	if !s.out || s.gen&genMask != low&genMask {
		cs.mu.Unlock()
		return p.badRelease(b, "it was released already (a double release, or a stale copy of a block handed out again)")
	}
	s.out = false
	s.gen++
	// A block drawn under an open admission gives its drawn bytes back to
	// the reservation; cached, it stays held from the device, so the
	// budget must hold both, or the block goes back to the device first.
	adm, drawn := s.adm, s.drawn
	s.adm, s.drawn = nil, 0
	if adm != nil {
		adm.used.Add(-b.Size)
	}
	sh.active.Add(-b.Size)
	// Close sets closed before it empties each class under its lock, so a
	// block is either cached before Close empties its class or not at all.
	keep := c < numClasses && !p.closed.Load()
	refilled := !keep || adm == nil || p.refillBeside(adm, drawn) // most blocks were drawn under no admission: no call
	if keep && refilled && p.cacheRoom(b.Size) {
		cs.idle = append(cs.idle, i)
		cs.mu.Unlock()
		return nil
	}
	cs.mu.Unlock()
	if keep {
		p.evictions.Add(1)
	}
	err := p.toDevice(h, c, i, s)
	if !refilled || !keep {
		p.refill(adm, drawn)
	}
	return err
}

// cacheRoom reports whether a block of size bytes just released may stay
// cached, and counts it cached if so: under a MaxCachedBytes cap, a
// reservation of cache room that fails exactly when the block would take
// the cache past the cap.
func (p *Pool) cacheRoom(size int64) bool {
	if p.maxCached < 0 {
		return true
	}
	for {
		n := p.cached.Load()
		if size > p.maxCached-n {
			return false
		}
		if p.cached.CompareAndSwap(n, n+size) {
			return true
		}
	}
}

// badRelease reports a release of a block this pool did not hand out.
func (p *Pool) badRelease(b tensor.Block, why string) error {
	p.badReleases.Add(1)
	err := fmt.Errorf("%w: pool on %s refused block %#x (%s): %s", tensor.ErrInvalidPointer,
		p.name, uintptr(b.Ptr), format.Bytes(b.Size), why)
	if invariants.Enabled {
		panic(err)
	}
	return err
}

// toDevice frees the block of slot i, of class c in shard h (its home),
// which the caller took off the idle list or out of the hands of its last
// holder, and puts the slot on the class's empty list there. Neither an
// idle slot taken off its list nor one just released can be stolen, so
// its home stays h. The pool stops counting the block even
// if the device refuses the free: the block cannot be handed out again,
// and a free that may have half happened must not be retried.
func (p *Pool) toDevice(h uint32, c int, i uint32, s *slot) error {
	cs := &p.shards[h].Load().classes[c]
	cs.mu.Lock()
	ptr, size := s.ptr, s.size
	s.ptr, s.size = 0, 0 // matches no block: stale copies are refused
	cs.mu.Unlock()

	// The books let the block go by defer, so a Free that calls
	// runtime.Goexit leaves them exact too.
	defer func() {
		p.deviceFrees.Add(1)
		p.dropReserved(size)
		cs.mu.Lock()
		cs.empty = append(cs.empty, i)
		cs.mu.Unlock()
	}()
	err := p.devFree(ptr, size)
	if err != nil {
		return fmt.Errorf("pool: returning %s block %#x to %s: %w", format.Bytes(size), uintptr(ptr), p.name, err)
	}
	return nil
}

func (p *Pool) dropReserved(size int64) {
	p.reserved.Add(-size)
	p.committed.Add(-size)
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
	p.eachShard(func(h uint32, sh *shard) {
		for c := range numClasses {
			cs := &sh.classes[c]
			cs.mu.Lock()
			batch = append(batch[:0], cs.idle...)
			cs.idle = cs.idle[:0]
			cs.mu.Unlock()
			// Device frees can be slow; the class lock is not held for them.
			for _, i := range batch {
				p.uncache(classSizes[c])
				if err := p.toDevice(h, c, i, p.slots.get(i)); err != nil {
					errs = append(errs, err)
				}
				n++
			}
		}
	})
	return n, errors.Join(errs...)
}

// A Pool is what tensor.New draws from and what its tracker counts as
// tensorlife's on its device.
var (
	_ tensor.Allocator = (*Pool)(nil)
	_ track.Part       = (*Pool)(nil)
)
