package pool

import "github.com/tensorlife/tensorlife/track"

// Stats are a pool's figures at one moment. Each is exact, but they are not
// read at one instant together: while other goroutines allocate, Reserved
// may differ from Active+Cached by blocks in flight. Once the pool is quiet,
// Reserved == Active + Cached and ActiveBlocks + CachedBlocks is the number
// of blocks held from the device.
type Stats struct {
	Device string // device name
	// Reserved bytes are held from the device; Active are in blocks handed
	// out; Cached are in idle blocks kept for reuse. All are after rounding
	// to size classes.
	Reserved, Active, Cached int64
	// ActiveBlocks and CachedBlocks count the blocks behind Active and
	// Cached.
	ActiveBlocks, CachedBlocks int64
	// PeakReserved is the highest Reserved ever. PeakActive is the highest
	// Active seen at a device allocation or a Stats call: a peak reached only
	// through cache hits between two of those is not seen.
	PeakReserved, PeakActive int64
	// Limit is the budget in bytes; 0 means none.
	Limit int64
	// MaxCached is the cap on Cached; -1 means none.
	MaxCached int64
	// DeviceAllocs and DeviceFrees count calls that reached the device and
	// succeeded (DeviceFrees: attempted; the pool stops counting a block
	// whose free failed).
	DeviceAllocs, DeviceFrees int64
	// Hits are allocations served from the cache; Misses went to the
	// device (or failed). Evictions are cached blocks returned to the device
	// because the cache was at MaxCachedBytes or to make room for an
	// allocation that did not fit; EmptyCache and Close are not counted.
	Hits, Misses, Evictions int64
	// OOMs counts allocations refused with an *tensor.OOMError.
	OOMs int64
	// BadReleases counts releases refused because the block was not handed
	// out by this pool: double releases and forged blocks.
	BadReleases int64
}

// Stats returns the pool's figures. It takes each size class's lock in turn,
// briefly; it is cheap enough for a metrics callback.
func (p *Pool) Stats() Stats {
	s := Stats{
		Device:       p.dev.Name(),
		Limit:        p.budget,
		MaxCached:    p.maxCached,
		DeviceAllocs: p.deviceAllocs.Load(),
		DeviceFrees:  p.deviceFrees.Load(),
		Misses:       p.misses.Load(),
		Evictions:    p.evictions.Load(),
		OOMs:         p.ooms.Load(),
		BadReleases:  p.badReleases.Load(),
	}
	for c := range numClasses {
		fl := &p.classes[c]
		fl.mu.Lock()
		n, hits := int64(len(fl.idle)), fl.hits
		fl.mu.Unlock()
		s.CachedBlocks += n
		s.Cached += n * classSizes[c]
		s.Hits += hits
	}
	s.Active = p.active.load()
	raise(&p.peakActive, s.Active)
	s.Reserved = p.reserved.Load()
	s.ActiveBlocks = max(0, p.deviceBlocks.Load()-s.CachedBlocks)
	s.PeakActive = max(p.peakActive.Load(), s.Active)
	s.PeakReserved = max(p.peakReserved.Load(), s.Reserved)
	return s
}

// PoolStats returns the figures metrics read (track.PoolSource).
func (p *Pool) PoolStats() track.PoolStats {
	s := p.Stats()
	return track.PoolStats{
		Device:   s.Device,
		Reserved: s.Reserved, Active: s.Active, Cached: s.Cached,
		PeakReserved: s.PeakReserved, PeakActive: s.PeakActive,
		Limit:        s.Limit,
		DeviceAllocs: s.DeviceAllocs, DeviceFrees: s.DeviceFrees,
		Hits: s.Hits, Misses: s.Misses, Evictions: s.Evictions,
		OOMs: s.OOMs,
	}
}
