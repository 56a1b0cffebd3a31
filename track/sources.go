package track

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/isnil"
)

// The types in this file let reports and metrics read figures from packages
// above track (pool, mask, tensor) without track importing them: a
// *pool.Pool is a PoolSource, a *mask.Cache a CacheSource, and any
// tensor.Device a DeviceSource.

// PoolStats are a caching allocator's figures at one moment (a *pool.Pool's
// Stats). Each is exact, but they are not read at one instant together:
// while other goroutines allocate, Reserved may differ from Active+Cached by
// blocks in flight. Once the pool is quiet, Reserved == Active + Cached.
type PoolStats struct {
	Device string // device name
	// Reserved bytes are held from the device; Active are in blocks handed
	// out; Cached are in idle blocks kept for reuse. All are after rounding
	// to the allocator's block sizes.
	Reserved, Active, Cached int64
	// ActiveBlocks and CachedBlocks count the blocks behind Active and
	// Cached.
	ActiveBlocks, CachedBlocks int64
	// PeakReserved is the highest Reserved ever. PeakActive is the highest
	// Active seen at a device allocation or a Stats call.
	PeakReserved, PeakActive int64
	// Limit is the memory budget in bytes; 0 means none.
	Limit int64
	// MaxCached is the cap on Cached; -1 means none.
	MaxCached int64
	// DeviceAllocs and DeviceFrees count calls that reached the device.
	DeviceAllocs, DeviceFrees int64
	// Hits are allocations served from the cache; Misses went to the device
	// (or failed). Evictions are cached blocks returned to the device to keep
	// the cache bounded or to make room.
	Hits, Misses, Evictions int64
	// OOMs counts allocations refused for lack of memory.
	OOMs int64
	// BadReleases counts releases refused because the block was not handed
	// out by this allocator: double releases and forged blocks.
	BadReleases int64
}

// PoolSource is an allocator that reports PoolStats (a *pool.Pool).
type PoolSource interface {
	Stats() PoolStats
}

// CacheStats are a bounded cache's figures (a *mask.Cache's Stats). Each is
// exact; they are not read at one instant together.
type CacheStats struct {
	Name           string
	Bytes, Entries int64 // what the cache holds
	MaxBytes       int64 // the byte budget (the cache's MaxBytes option)
	MaxEntries     int64 // the entry bound
	Hits, Misses   int64
	Evictions      int64 // entries dropped to keep the bounds
	Rejected       int64 // entries not cached: larger than the budget
}

// CacheSource is a cache that reports CacheStats (a *mask.Cache).
type CacheSource interface {
	Stats() CacheStats
}

// DeviceSource is a device whose memory can be read: every tensor.Device.
type DeviceSource interface {
	Name() string
	MemInfo() (free, total int64, err error)
}

// Sources name the figures a report or a metrics registration reads besides
// the tracker's own: pools, caches, devices and a growth watcher. Each is
// read only when a summary is written or metrics are collected. A service
// builds one Sources value and passes it to WriteSummary (WithSources) and
// to the OpenTelemetry bridge alike.
type Sources struct {
	Pools   []PoolSource
	Caches  []CacheSource
	Devices []DeviceSource
	Watcher *Watcher // must watch the same tracker
}

// Validate reports a nil source, which would fail the first report rather
// than here, and a watcher of another tracker than tr, whose sites would be
// reported next to figures they are not part of. Errors match
// ErrInvalidOption.
func (s Sources) Validate(tr *Tracker) error {
	if err := noNil("Pools", s.Pools); err != nil {
		return err
	}
	if err := noNil("Caches", s.Caches); err != nil {
		return err
	}
	if err := noNil("Devices", s.Devices); err != nil {
		return err
	}
	if s.Watcher != nil && tr != nil && s.Watcher.tr != tr {
		return fmt.Errorf("%w: Sources.Watcher watches tracker %q, not %q",
			ErrInvalidOption, s.Watcher.tr.Name(), tr.Name())
	}
	return nil
}

// noNil reports the first nil source in list, the field of Sources named
// field.
func noNil[S any](field string, list []S) error {
	for i, src := range list {
		if isnil.Value(src) {
			return fmt.Errorf("%w: Sources.%s[%d] is nil", ErrInvalidOption, field, i)
		}
	}
	return nil
}

// WithSources adds the figures of pools, caches, devices and a watcher to a
// summary (WriteSummary).
func WithSources(src Sources) Option {
	return only("WithSources", func(o *options) error {
		o.summary.sources = src
		return nil
	}, forSummary)
}
