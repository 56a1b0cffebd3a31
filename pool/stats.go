package pool

import (
	"github.com/tensorlife/tensorlife/internal/peak"
	"github.com/tensorlife/tensorlife/track"
)

// Stats returns the pool's figures (a Pool is a track.PoolSource). It takes
// each size class's lock in turn, briefly; it is cheap enough for a metrics
// callback. PeakActive is sampled at device allocations and Stats calls: a
// peak reached only through cache hits between two of those is not seen.
func (p *Pool) Stats() track.PoolStats {
	s, _ := p.stats()
	return s
}

// stats returns Stats and the size of the largest cached block, for an
// out-of-memory error, from one pass over the size classes.
func (p *Pool) stats() (s track.PoolStats, largestCached int64) {
	s = track.PoolStats{
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
		if n > 0 {
			largestCached = classSizes[c] // the classes grow
		}
	}
	s.Active = p.active.load()
	peak.Raise(&p.peakActive, s.Active)
	s.Reserved = p.reserved.Load()
	s.ActiveBlocks = max(0, p.deviceBlocks.Load()-s.CachedBlocks)
	s.PeakActive = max(p.peakActive.Load(), s.Active)
	s.PeakReserved = max(p.peakReserved.Load(), s.Reserved)
	return s, largestCached
}
