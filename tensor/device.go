package tensor

import (
	"context"

	"github.com/tensorlife/tensorlife/track"
)

// DevicePtr is an address in a device's memory. Pointer arithmetic is allowed
// within one allocation: p+off addresses the byte off past p. The zero
// DevicePtr is never a valid allocation.
type DevicePtr uintptr

// Add returns p advanced by off bytes.
func (p DevicePtr) Add(off int64) DevicePtr { return p + DevicePtr(off) }

// Device is the raw memory of one device. It knows nothing about tensors,
// call sites or caching: Alloc and Free go straight to the device (for CUDA,
// cuMemAlloc and cuMemFree). Wrap a Device in a pool.Pool to cache blocks and
// enforce a budget, or in DeviceAllocator to allocate directly.
//
// Implementations must be safe for concurrent use, must reject pointers they
// did not hand out with an error matching ErrInvalidPointer where they can
// tell, and must report exhaustion with an error matching ErrOutOfMemory.
type Device interface {
	// Name identifies the device in reports and metrics: "host", "cuda:0".
	Name() string
	// Alloc reserves bytes (> 0) of device memory.
	Alloc(bytes int64) (DevicePtr, error)
	// Free returns memory from Alloc. bytes is the size passed to Alloc.
	Free(p DevicePtr, bytes int64) error
	// MemInfo reports the device's free and total bytes.
	MemInfo() (free, total int64, err error)
	// CopyToDevice copies src to device memory starting at dst.
	CopyToDevice(dst DevicePtr, src []byte) error
	// CopyToHost copies len(dst) bytes of device memory starting at src.
	CopyToHost(dst []byte, src DevicePtr) error
	// Memset sets bytes bytes starting at dst to value.
	Memset(dst DevicePtr, value byte, bytes int64) error
}

// Hardware is what a Device implements besides to name the hardware it
// runs on: a stable id, such as a GPU's UUID, under which reports and
// metrics also file its memory (report.DeviceMemory.HardwareID, the hw.id
// metric attribute).
type Hardware interface {
	UUID() string
}

// HostMemory is a Device whose memory is Go memory that code on the host
// may read and write in place, as a library that computes on the CPU needs
// (gorgonia.org/tensor's Dense, through contrib/gorgoniatrack). HostDevice
// is one. A GPU's memory is not, and the CUDA device does not implement
// it, even on a driver whose memory happens to lie on the host.
type HostMemory interface {
	Device
	// HostBytes returns the n bytes at p, which must lie in one live
	// allocation, as the Go memory that holds them: writes to the slice are
	// the device's memory. A pointer the device did not hand out, or has
	// taken back, is an error matching ErrInvalidPointer. The slice stays
	// valid Go memory while it is referenced, but after Free the range is
	// the device's again, to hand out anew.
	HostBytes(p DevicePtr, n int64) ([]byte, error)
}

// Block is a range of device memory handed out by an Allocator.
type Block struct {
	Ptr  DevicePtr // start of the block; 0 for a zero-size block
	Size int64     // bytes reserved, at least the bytes requested
	// Tag is private to the allocator that made the block: it identifies the
	// allocator and whatever it needs to take the block back (a size class).
	Tag uint64
}

// Allocator is what New draws memory from: a DeviceAllocator over a Device,
// or a *pool.Pool that caches blocks and enforces a budget. Implementations
// must be safe for concurrent use.
type Allocator interface {
	Device() Device
	// Tracker is where New records every tensor made from the allocator;
	// nil: untracked. It is set where the allocator is built
	// (NewDeviceAllocator, pool.Tracker), so New takes no tracker.
	Tracker() *track.Tracker
	// Allocate returns a block of at least bytes (> 0) bytes.
	Allocate(bytes int64) (Block, error)
	// Release returns a block from Allocate. A block from another allocator
	// is refused with an error matching ErrForeignBlock.
	Release(b Block) error
}

// ContextAllocator is an Allocator that also sees the context a tensor is
// made under: New and Make call AllocateContext instead of Allocate when
// the allocator has it. A *pool.Pool does, to draw the allocations of an
// admitted request from that request's reservation (pool.Pool.Admit).
type ContextAllocator interface {
	Allocator
	// AllocateContext is Allocate for a tensor made under ctx.
	AllocateContext(ctx context.Context, bytes int64) (Block, error)
}
