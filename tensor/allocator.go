package tensor

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/counter"
	"github.com/tensorlife/tensorlife/internal/ownalloc"

	"github.com/tensorlife/tensorlife/track"
)

// DeviceAllocator allocates straight from a Device, with no caching: every
// tensor is one device allocation. Use a pool.Pool in services; use a
// DeviceAllocator where each allocation must reach the device (tests, and
// the baseline that a pool is measured against). It is safe for concurrent
// use. It attaches itself to its tracker, so that reports count its memory
// as tensorlife's.
type DeviceAllocator struct {
	ownMark // its device's name, for New
	dev     Device
	name    string // dev.Name() at NewDeviceAllocator
	tracker *track.Tracker
	id      uint32
	books   books
}

// NewDeviceAllocator returns an allocator over dev that records tensors in
// tracker; a nil tracker leaves tensors from it untracked. It reads dev's
// name once, here: a Name that panics returns a *DeviceError matching
// ErrPanic.
func NewDeviceAllocator(dev Device, tracker *track.Tracker) (*DeviceAllocator, error) {
	if dev == nil {
		return nil, fmt.Errorf("%w: nil device", ErrNilAllocator)
	}
	name, err := deviceName(tracker, dev)
	if err != nil {
		return nil, err
	}
	a := &DeviceAllocator{dev: dev, name: name, tracker: tracker, id: counter.NewAllocatorID()}
	a.ownMark = ownalloc.New[Allocator](a, name)
	track.Attach(tracker, a)
	return a, nil
}

// AllocatorStats are the figures of an allocator that caches nothing (a
// DeviceAllocator). Each is exact; they are not read at one instant
// together.
type AllocatorStats struct {
	Device   string
	Reserved int64 // bytes held from the device
	Peak     int64 // the most bytes ever held from it
	Blocks   int64 // allocations not yet released
	Allocs   int64 // allocations that reached the device
	Frees    int64 // frees that reached the device
}

// Stats reports the bytes and blocks the allocator holds from the device.
func (a *DeviceAllocator) Stats() AllocatorStats { return a.books.stats(a.name) }

// PartInfo says what the allocator holds, for the tracker's readers (a
// DeviceAllocator is a track.Part): the device's name, the bytes it holds
// there, no budget, and the device's free memory (-1 if MemInfo fails).
func (a *DeviceAllocator) PartInfo() track.PartInfo {
	_, left := a.Headroom()
	return track.PartInfo{Kind: "allocator", Device: a.name, Reserved: a.books.reserved.Load(), Left: left}
}

// Reserved returns the device's name and the bytes the allocator holds
// there.
func (a *DeviceAllocator) Reserved() (device string, bytes int64) {
	return a.name, a.books.reserved.Load()
}

// Device returns the device allocations come from.
func (a *DeviceAllocator) Device() Device { return a.dev }

// Headroom returns no budget and the device's free memory (-1 if MemInfo
// fails).
func (a *DeviceAllocator) Headroom() (budget, left int64) {
	var free int64
	err := deviceCall(a.tracker, a.dev, "MemInfo", "meminfo", a.name, 0, func() (err error) {
		free, _, err = a.dev.MemInfo()
		return err
	})
	if err != nil {
		return 0, -1
	}
	return 0, max(free, 0)
}

// Tracker returns the tracker tensors are recorded in; nil if untracked.
func (a *DeviceAllocator) Tracker() *track.Tracker { return a.tracker }

// Allocate asks the device for bytes.
func (a *DeviceAllocator) Allocate(bytes int64) (Block, error) {
	if bytes <= 0 {
		return Block{}, fmt.Errorf("%w: allocate %d bytes", ErrInvalidSize, bytes)
	}
	held, ok := a.books.reserve(bytes)
	if !ok {
		return Block{}, &OOMError{Device: a.name, Requested: bytes, DeviceFree: -1, Outside: -1, Reason: "device",
			Err: fmt.Errorf("the allocator would hold more than 2^63-1 bytes")}
	}
	// The reservation is taken back by defer, so that an Alloc that fails,
	// panics or calls runtime.Goexit leaves the books as they were.
	made := false
	defer func() {
		if !made {
			a.books.unreserve(bytes)
		}
	}()
	var p DevicePtr
	err := deviceCall(a.tracker, a.dev, "Alloc", "alloc", a.name, bytes, func() (err error) {
		p, err = a.dev.Alloc(bytes)
		return err
	})
	if err != nil {
		return Block{}, err
	}
	made = true
	a.books.add(held)
	return Block{Ptr: p, Size: bytes, Tag: uint64(a.id) << 32}, nil
}

// Release returns a block to the device.
func (a *DeviceAllocator) Release(b Block) error {
	if uint32(b.Tag>>32) != a.id {
		return fmt.Errorf("%w: block %#x", ErrForeignBlock, uintptr(b.Ptr))
	}
	if err := deviceCall(a.tracker, a.dev, "Free", "free", a.name, b.Size, func() error {
		return a.dev.Free(b.Ptr, b.Size)
	}); err != nil {
		return err
	}
	a.books.remove(b.Size)
	return nil
}

// books count the memory a DeviceAllocator holds from its device. Each
// figure is exact; they are not read at one instant together.
type books struct {
	reserved, peak atomic.Int64
	allocs, frees  atomic.Int64
}

// reserve counts bytes as held before the device is asked, as a pool
// reserves against its budget, and returns what is then held; it reports
// false, counting nothing, when
// that would take the books past math.MaxInt64: only a device that hands
// out more memory than exists gets there, and the books never wrap.
func (b *books) reserve(bytes int64) (held int64, ok bool) {
	for {
		r := b.reserved.Load()
		if bytes > math.MaxInt64-r {
			return r, false
		}
		if b.reserved.CompareAndSwap(r, r+bytes) {
			return r + bytes, true
		}
	}
}

// unreserve takes back a reservation whose allocation failed.
func (b *books) unreserve(bytes int64) { b.reserved.Add(-bytes) }

// add counts an allocation reserved and made, held the bytes reserve
// returned.
func (b *books) add(held int64) {
	b.allocs.Add(1)
	counter.RaisePeak(&b.peak, held)
}

// remove counts the release of an allocation of bytes.
func (b *books) remove(bytes int64) {
	b.frees.Add(1)
	b.reserved.Add(-bytes)
}

// stats returns the figures for device, one block per allocation not yet
// released.
func (b *books) stats(device string) AllocatorStats {
	// Frees first: a block is counted allocated before it can be freed, so
	// the difference is never negative.
	frees := b.frees.Load()
	allocs := b.allocs.Load()
	return AllocatorStats{Device: device, Reserved: b.reserved.Load(), Peak: b.peak.Load(),
		Blocks: allocs - frees, Allocs: allocs, Frees: frees}
}
