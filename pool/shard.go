package pool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// Sharding. An inference server allocates from every request goroutine,
// and most of its tensors fall in a few size classes: one lock and one
// counter per class would be cache lines that every core writes on every
// hit, and the pool would get slower per operation as goroutines are added
// (it did: 1.7–3.1× per New+Free at 8 goroutines where sync.Pool got
// faster). So the pool keeps, as Go's allocator keeps a cache per P, its
// free lists in shards: each shard has, per class, its own lock, idle and
// empty lists and hit count, and its own active-bytes counter. The warm path
// writes only its shard's lines and the slot of its block.
//
// A goroutine picks its shard by a hint that goroutines running on one P
// at once share and goroutines on different Ps do not: a number drawn
// round-robin once per P and cached in a sync.Pool, whose fast path is
// per-P (procHint). No linkname into the runtime is needed. A Get and a
// Put cost half as much again as the rest of a hit (13–15 ns on a loaded
// 2-core machine, where the hit costs 22–37), so each goroutine keeps the
// hint its P gave it, as a P keeps it in the sync.Pool: in a process-wide
// table slot named by the goroutine's stack, which is its own memory
// (goroutineHints). Reading it costs an address, a shift and a load; the
// sync.Pool is asked at a slot's first use, when another goroutine's
// stack took the slot since, and when the goroutine finds its shard's
// class lock held, which is what a goroutine moved to another P since it
// asked sees once the goroutines of its old P allocate beside it. A hit on
// a spread pool costs 1.05–1.2× a hit before it spread
// (BenchmarkPoolHitSpreadRatio; 1.47–1.64× with a Get and a Put each hit).
//
// It is only a hint: a goroutine moved to another P whose old P's
// goroutines allocate while its shard's lock is free, a sync.Pool emptied
// by the collector, or more Ps than shards make two Ps share a shard for a
// while, which costs speed, never correctness.
//
// Until a goroutine finds a class lock held by another (the first sign
// that goroutines contend), every goroutine uses shard 0 and asks for no
// hint: a pool used from one goroutine at a time costs what an unsharded
// one does. From then on, for the pool's life, each goroutine uses its
// hint's shard, and the blocks cached in shard 0 move to the shards that
// take them.
//
// A block belongs to one shard at a time, its slot's home: it is handed
// out from and released to that shard, whatever goroutine releases it, so
// Release needs no hint. An allocation whose shard has no idle block of its
// class takes one from a sibling shard (and makes it its own) before it
// asks the device, and a miss takes a sibling's empty slot before it makes
// a new one: the cache serves every shard, and the budget is one atomic
// reservation on the miss path, exact whatever the sharding.
//
// There are as many shards as the larger of GOMAXPROCS and the CPU count
// at New, rounded up to a power of two and at most maxShards: a P per
// shard while the hints last. A shard is made on first use (shard 0 at
// New, for the warm path to read without a lookup), so a pool costs the
// memory of the shards its goroutines use (14 KiB each).
const maxShards = 64

// classShard is one size class in one shard. Its lock guards its fields
// and the fields of the slots whose home it is: a slice push or pop and a
// few compares.
type classShard struct {
	mu    sync.Mutex
	idle  []uint32 // slots of cached blocks, most recently released last
	empty []uint32 // slots whose block went back to the device
	hits  int64
}

// shard is one shard: its classes (hugeClass's too, whose slots are
// reused like any other's) and the bytes of the blocks handed out from it.
type shard struct {
	active  atomic.Int64
	_       [2*counter.CacheLine - unsafe.Sizeof(atomic.Int64{})]byte // apart from class 0's lock
	classes [numClasses + 1]classShard
}

// A classShard fills one 64-byte line exactly: this fails to compile otherwise.
var _ = [1]struct{}{}[unsafe.Sizeof(classShard{})-counter.CacheLine]

// shardCount returns the number of shards of a pool made now.
func shardCount() int {
	n := max(runtime.GOMAXPROCS(0), runtime.NumCPU())
	s := 1
	for s < n && s < maxShards {
		s <<= 1
	}
	return s
}

// procHints hands each P a number, drawn in turn from nextHint when the P
// first asks (or asks again after the collector emptied the pool): see
// Sharding above. Process-wide, as the Ps are; shared by every Pool.
var (
	nextHint  atomic.Uint32
	procHints = sync.Pool{New: func() any {
		h := nextHint.Add(1) - 1
		return &h
	}}
)

// procHint returns the calling goroutine's P's hint.
func procHint() uint32 {
	h := procHints.Get().(*uint32)
	n := *h
	procHints.Put(h)
	return n
}

// goroutineHints keeps, per goroutine stack, the hint procHint last gave
// the goroutine: slot by the stack's 2 KiB block (the smallest a
// goroutine stack is, so that no two live goroutines share a block), the
// block's number in the high bits of the word and the hint in its low 8
// (a pool masks it to its shards, at most maxShards). Process-wide, as the
// Ps are; 32 KiB. A goroutine whose stack is deeper than a block at one
// call than at another keeps one slot per depth; one whose stack the
// runtime moved finds its slot empty or another's and asks procHint
// again. The table holds numbers, never pointers: a stack it names may be
// gone, and a later goroutine on the same memory (the runtime reuses a
// P's freed stacks on that P first) inherits a hint that is most likely
// still right.
var goroutineHints [hintSlots]atomic.Uint64

const (
	hintSlotBits   = 12
	hintSlots      = 1 << hintSlotBits
	stackBlockBits = 11 // 2 KiB: runtime's smallest goroutine stack
	hintBits       = 8
)

// A hint fits the bits a slot keeps for it: this fails to compile
// otherwise.
var _ = [1]struct{}{}[(maxShards-1)>>hintBits]

// stackBlock returns the 2 KiB block of the calling goroutine's stack
// that holds the caller's frame: what names the goroutine in
// goroutineHints. Small enough to be inlined, so that the frame is the
// caller's.
func stackBlock() uint64 {
	var here byte // on the goroutine's stack
	return uint64(uintptr(unsafe.Pointer(&here))) >> stackBlockBits
}

// goroutineHint returns the shard hint kept for the goroutine whose stack
// holds block, the one procHint gave it; ok is false if the block's slot
// holds another block's, when the caller asks refreshHint. Small enough
// to be inlined.
func goroutineHint(block uint64) (hint uint32, ok bool) {
	w := goroutineHints[hintSlot(block)].Load()
	return uint32(w) & (1<<hintBits - 1), w>>hintBits == block
}

// hintSlot returns the slot of goroutineHints for a stack block: its low
// bits. The stacks of goroutines made together lie side by side, so they
// take slots side by side; two stacks share a slot only 8 MiB apart.
func hintSlot(block uint64) uint64 { return block % hintSlots }

// refreshHint asks procHint for the hint of the goroutine whose stack
// holds block and keeps it as that goroutine's: what a goroutine does when
// its block's slot holds another block's, and when it finds its shard's
// lock held, since it may have moved to another P since it last asked.
//
//go:noinline
func refreshHint(block uint64) uint32 {
	h := procHint() & (1<<hintBits - 1)
	goroutineHints[hintSlot(block)].Store(block<<hintBits | uint64(h))
	return h
}

// home packs a slot's shard and class: what Release reads, without a lock,
// to find the lock that guards the slot. 0 is a slot not made yet.
func home(shard uint32, class int) uint32 { return shard<<8 | uint32(class+1) }

func homeShard(h uint32) uint32 { return h >> 8 }
func homeClass(h uint32) int    { return int(h&0xff) - 1 }

// shard returns shard i, making it on first use. Small enough to be
// inlined.
func (p *Pool) shard(i uint32) *shard {
	if sh := p.shards[i%maxShards].Load(); sh != nil {
		return sh
	}
	return p.makeShard(i)
}

func (p *Pool) makeShard(i uint32) *shard {
	p.shards[i].CompareAndSwap(nil, new(shard))
	return p.shards[i].Load()
}

// lockContended locks cs, a class lock of the warm path that TryLock found
// held by another goroutine, and spreads the pool over its shards. The
// warm path calls TryLock itself: a method around the two would be too
// large to inline, and its call cost a hit and a release a nanosecond
// each.
func (p *Pool) lockContended(cs *classShard) {
	if p.shardMask > 0 && !p.spread.Load() {
		p.spread.Store(true)
	}
	cs.mu.Lock()
}

// lockHinted is lockContended for an allocation in class c of shard h,
// whose lock TryLock found held. A goroutine that took h from its hint
// (block, its stack block, is not 0) asks its P's hint afresh, since it
// may have moved to another P since it last asked, and takes the lock of
// that hint's shard. It returns the shard it locked and its class.
func (p *Pool) lockHinted(h uint32, sh *shard, c int, block uint64) (uint32, *shard, *classShard) {
	if block != 0 {
		if fresh := refreshHint(block) & p.shardMask; fresh != h {
			h, sh = fresh, p.shard(fresh)
		}
	}
	cs := &sh.classes[c]
	p.lockContended(cs)
	return h, sh, cs
}

// eachShard calls f with every shard made so far.
func (p *Pool) eachShard(f func(i uint32, sh *shard)) {
	for i := range p.shardMask + 1 {
		if sh := p.shards[i].Load(); sh != nil {
			f(i, sh)
		}
	}
}

// activeBytes returns the bytes in blocks handed out: the sum over shards.
func (p *Pool) activeBytes() int64 {
	var sum int64
	p.eachShard(func(_ uint32, sh *shard) { sum += sh.active.Load() })
	return sum
}
