package tensor

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/allocid"

	"github.com/tensorlife/tensorlife/track"
)

// DeviceAllocator allocates straight from a Device, with no caching: every
// tensor is one device allocation. Use a pool.Pool in services; use a
// DeviceAllocator where each allocation must reach the device (tests, and
// the baseline that a pool is measured against). It is safe for concurrent
// use.
type DeviceAllocator struct {
	dev     Device
	tracker *track.Tracker
	id      uint32
}

// NewDeviceAllocator returns an allocator over dev that records tensors in
// tracker; a nil tracker leaves tensors from it untracked.
func NewDeviceAllocator(dev Device, tracker *track.Tracker) (*DeviceAllocator, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: nil device", ErrNilAllocator)
	}
	return &DeviceAllocator{dev: dev, tracker: tracker, id: allocid.New()}, nil
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
	return Block{Ptr: p, Size: bytes, Tag: uint64(a.id) << 32}, nil
}

// Release returns a block to the device.
func (a *DeviceAllocator) Release(b Block) error {
	if uint32(b.Tag>>32) != a.id {
		return fmt.Errorf("%w: block %#x", ErrForeignBlock, uintptr(b.Ptr))
	}
	return a.dev.Free(b.Ptr, b.Size)
}
