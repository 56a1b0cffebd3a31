package pool

import (
	"github.com/tensorlife/tensorlife/internal/counter"
	"github.com/tensorlife/tensorlife/track"
)

// Stats are a pool's figures at one moment. Each is exact, but they are not read at one instant together:
// while other goroutines allocate, Reserved may differ from Active+Cached by
// blocks in flight. Once the pool is quiet, Reserved == Active + Cached.
type Stats struct {
	Device string // device name
	// Reserved bytes are held from the device; Active are in blocks handed
	// out; Cached are in idle blocks kept for reuse. All are after rounding
	// to the allocator's block sizes.
	Reserved int64
	Active   int64
	Cached   int64
	// ActiveBlocks and CachedBlocks count the blocks behind Active and
	// Cached.
	ActiveBlocks int64
	CachedBlocks int64
	// PeakReserved is the highest Reserved ever. PeakActive is the highest
	// Active seen at a device allocation or a Stats call.
	PeakReserved int64
	PeakActive   int64
	// Limit is the memory budget in bytes; 0 means none.
	Limit int64
	// MaxCached is the cap on Cached; -1 means none.
	MaxCached int64
	// DeviceAllocs and DeviceFrees count calls that reached the device.
	DeviceAllocs int64
	DeviceFrees  int64
	// Hits are allocations served from the cache; Misses went to the device
	// (or failed). Evictions are cached blocks returned to the device to keep
	// the cache bounded or to make room.
	Hits      int64
	Misses    int64
	Evictions int64
	// OOMs counts allocations refused for lack of memory.
	OOMs int64
	// BadReleases counts releases refused because the block was not handed
	// out by this allocator: double releases and forged blocks.
	BadReleases int64
	// CallbackPanics counts panics recovered from OnOutOfMemory's hook.
	CallbackPanics int64
	// Promised is the bytes the open admissions (Admit) reserve and have
	// not drawn; Admissions counts them; Reservations is the bytes they
	// reserved in all, drawn or not. The budget holds Reserved plus
	// Promised: a block an admission drew and freed that stays cached is
	// promised again only if the budget holds both.
	Promised     int64
	Admissions   int64
	Reservations int64
	// AdmissionKinds is what admission knows of each request kind it was
	// asked for, sorted by kind (track.OtherKind, the kinds past
	// track.MaxRequestKinds, last); nil before the first Admit.
	AdmissionKinds []AdmissionKind
}

// Stats returns the pool's figures. It takes
// each size class's lock in each shard in turn, briefly; it is cheap enough for a metrics
// callback. PeakActive is sampled at device allocations and Stats calls: a
// peak reached only through cache hits between two of those is not seen.
func (p *Pool) Stats() Stats {
	s, _ := p.stats()
	if kinds := p.admKinds.all(); len(kinds) > 0 {
		s.AdmissionKinds = make([]AdmissionKind, len(kinds))
		for i, k := range kinds {
			s.AdmissionKinds[i] = k.read()
		}
	}
	return s
}

// stats returns Stats and the size of the largest cached block, for an
// out-of-memory error, from one pass over the size classes.
func (p *Pool) stats() (s Stats, largestCached int64) {
	s = Stats{
		Device:       p.name,
		Limit:        p.budget,
		MaxCached:    p.maxCached,
		DeviceAllocs: p.deviceAllocs.Load(),
		DeviceFrees:  p.deviceFrees.Load(),
		Misses:       p.misses.Load(),
		Evictions:    p.evictions.Load(),
		OOMs:         p.ooms.Load(),
		BadReleases:  p.badReleases.Load(),
	}
	s.CallbackPanics = p.hookPanics.Load()
	p.eachShard(func(_ uint32, sh *shard) {
		for c := range numClasses {
			cs := &sh.classes[c]
			cs.mu.Lock()
			n, hits := int64(len(cs.idle)), cs.hits
			cs.mu.Unlock()
			s.CachedBlocks += n
			s.Cached += n * classSizes[c]
			s.Hits += hits
			if n > 0 {
				largestCached = max(largestCached, classSizes[c])
			}
		}
	})
	s.Active = p.activeBytes()
	counter.RaisePeak(&p.peakActive, s.Active)
	s.Reserved = p.reserved.Load()
	s.Promised = max(p.promised.Load(), 0)
	s.Admissions = max(p.admissions.Load(), 0)
	s.Reservations = max(p.reservations.Load(), 0)
	s.ActiveBlocks = max(0, p.deviceBlocks.Load()-s.CachedBlocks)
	s.PeakActive = max(p.peakActive.Load(), s.Active)
	s.PeakReserved = max(p.peakReserved.Load(), s.Reserved)
	return s, largestCached
}

// PartInfo says what the pool holds, for the tracker's readers (a Pool is
// a track.Part): its device, the bytes its blocks hold there (cached ones
// too), and its headroom (Headroom).
func (p *Pool) PartInfo() track.PartInfo {
	budget, left := p.Headroom()
	return track.PartInfo{Kind: "pool", Device: p.name, Reserved: p.reserved.Load(), Budget: budget, Left: left}
}

// Reserved returns the pool's device and the bytes it holds there: what
// reports count as tensorlife's on the device.
func (p *Pool) Reserved() (device string, bytes int64) {
	return p.name, p.reserved.Load()
}

// Headroom returns the pool's budget (0: none) and the bytes it may still
// hand out before it refuses an allocation: the budget less the bytes in
// blocks handed out and the reservations admissions have not drawn (Admit),
// since cached blocks go back to the device before an allocation is
// refused; without a budget, the device's free memory (-1 if
// MemInfo fails).
func (p *Pool) Headroom() (budget, left int64) {
	if p.budget == 0 {
		free, _, err := p.memInfo()
		if err != nil {
			return 0, -1
		}
		return 0, max(free, 0)
	}
	return p.budget, max(p.budget-p.activeBytes()-p.promised.Load(), 0)
}
