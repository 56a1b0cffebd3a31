package tensor

import (
	"fmt"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/allocid"

	"github.com/tensorlife/tensorlife/track"
)

// DeviceAllocator allocates straight from a Device, with no caching: every
// tensor is one device allocation. Use a pool.Pool in services; use a
// DeviceAllocator where each allocation must reach the device (tests, and
// the baseline that a pool is measured against). It is safe for concurrent
// use.
//
// It reports what it holds from the device as a track.PoolSource (Stats),
// and attaches itself to its tracker (track.Attach), so that reports count
// its memory as tensorlife's and not as memory outside tensorlife.
type DeviceAllocator struct {
	dev     Device
	tracker *track.Tracker
	id      uint32

	reserved, blocks, peak atomic.Int64
	allocs, frees          atomic.Int64
}

// NewDeviceAllocator returns an allocator over dev that records tensors in
// tracker; a nil tracker leaves tensors from it untracked.
func NewDeviceAllocator(dev Device, tracker *track.Tracker) (*DeviceAllocator, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: nil device", ErrNilAllocator)
	}
	a := &DeviceAllocator{dev: dev, tracker: tracker, id: allocid.New()}
	track.Attach(tracker, a)
	return a, nil
}

// Stats reports the bytes and blocks the allocator holds from the device.
// It caches nothing, so Reserved equals Active and Cached is 0. Each figure
// is exact; they are not read at one instant together.
func (a *DeviceAllocator) Stats() track.PoolStats {
	reserved, peak := a.reserved.Load(), a.peak.Load()
	return track.PoolStats{
		Device:       a.dev.Name(),
		Reserved:     reserved,
		Active:       reserved,
		ActiveBlocks: a.blocks.Load(),
		PeakReserved: peak,
		PeakActive:   peak,
		DeviceAllocs: a.allocs.Load(),
		DeviceFrees:  a.frees.Load(),
		Misses:       a.allocs.Load(),
	}
}

// Device returns the device allocations come from.
func (a *DeviceAllocator) Device() Device { return a.dev }

// Tracker returns the tracker tensors are recorded in; nil if untracked.
func (a *DeviceAllocator) Tracker() *track.Tracker { return a.tracker }

// Allocate asks the device for bytes.
func (a *DeviceAllocator) Allocate(bytes int64) (Block, error) {
	if bytes <= 0 {
		return Block{}, fmt.Errorf("%w: allocate %d bytes", ErrInvalidSize, bytes)
	}
	p, err := a.dev.Alloc(bytes)
	if err != nil {
		return Block{}, err
	}
	a.allocs.Add(1)
	a.blocks.Add(1)
	now := a.reserved.Add(bytes)
	for peak := a.peak.Load(); now > peak && !a.peak.CompareAndSwap(peak, now); peak = a.peak.Load() {
	}
	return Block{Ptr: p, Size: bytes, Tag: uint64(a.id) << 32}, nil
}

// Release returns a block to the device.
func (a *DeviceAllocator) Release(b Block) error {
	if uint32(b.Tag>>32) != a.id {
		return fmt.Errorf("%w: block %#x", ErrForeignBlock, uintptr(b.Ptr))
	}
	if err := a.dev.Free(b.Ptr, b.Size); err != nil {
		return err
	}
	a.frees.Add(1)
	a.blocks.Add(-1)
	a.reserved.Add(-b.Size)
	return nil
}
