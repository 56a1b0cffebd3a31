package tensor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tensorlife/tensorlife/internal/format"

	"github.com/tensorlife/tensorlife/track"
)

// Sentinel errors: every error this package and its allocators return
// matches one with errors.Is (typed errors carry the detail).
var (
	// ErrFreed is returned by every method of a tensor handle after Free.
	ErrFreed = errors.New("tensor: use of freed tensor")
	// ErrDoubleFree is returned by a second Free of the same handle. The
	// returned *DoubleFreeError names the allocation and first free sites.
	ErrDoubleFree = errors.New("tensor: double free")
	// ErrOutOfMemory means a device or a memory budget could not satisfy an
	// allocation. Allocators return an *OOMError that matches it.
	ErrOutOfMemory = errors.New("tensor: out of memory")
	// ErrInvalidShape means a dimension is negative or the element or byte
	// count overflows int64.
	ErrInvalidShape = errors.New("tensor: invalid shape")
	// ErrInvalidDType means the dtype is not one this package knows.
	ErrInvalidDType = errors.New("tensor: invalid dtype")
	// ErrNilAllocator means a nil Allocator or Device was passed.
	ErrNilAllocator = errors.New("tensor: nil allocator")
	// ErrSizeMismatch means a host buffer's length does not match the tensor's
	// byte size or the device range it is copied to or from.
	ErrSizeMismatch = errors.New("tensor: size mismatch")
	// ErrInvalidSize means a negative or otherwise unusable byte count.
	ErrInvalidSize = errors.New("tensor: invalid size")
	// ErrInvalidPointer means a device pointer or block that the device or
	// allocator did not hand out, or has already taken back.
	ErrInvalidPointer = errors.New("tensor: invalid device pointer")
	// ErrForeignBlock means a block was released to an allocator that did not
	// allocate it.
	ErrForeignBlock = errors.New("tensor: block belongs to another allocator")
	// ErrClosed means the device or allocator has been closed.
	ErrClosed = errors.New("tensor: closed")
	// ErrNoDevice means a device could not be opened: no driver, no GPU, or a
	// binary built without the device's support.
	ErrNoDevice = errors.New("tensor: device unavailable")
	// ErrPanic means a device's or an allocator's method panicked and
	// tensorlife recovered it: the call fails with a *DeviceError whose
	// cause is a *track.PanicError naming the method. It is
	// track.ErrPanic.
	ErrPanic = track.ErrPanic
)

// DeviceError is a failure reported by a device driver, with the operation,
// the size involved and the device. It unwraps to its cause, which is one of
// this package's sentinels (ErrOutOfMemory, ErrInvalidPointer, ...) where one
// applies, and the driver's own error otherwise.
type DeviceError struct {
	Op     string // "alloc", "free", "copy to device", "copy to host", "memset", "meminfo", "name", "host bytes"
	Device string // Device.Name()
	Bytes  int64  // size of the request; 0 where it does not apply
	Err    error  // the cause
}

func (e *DeviceError) Error() string {
	if e.Bytes > 0 {
		return fmt.Sprintf("tensor: %s %s of %s: %v", e.Device, e.Op, format.Bytes(e.Bytes), e.Err)
	}
	return fmt.Sprintf("tensor: %s %s: %v", e.Device, e.Op, e.Err)
}

func (e *DeviceError) Unwrap() error { return e.Err }

// OOMError reports an allocation that a device or a memory budget refused.
// Its Error text alone tells an operator where the memory went: each figure
// below, and the sites holding the most, with who holds them. It matches
// ErrOutOfMemory with errors.Is.
type OOMError struct {
	Device     string // device name
	Requested  int64  // bytes asked for (after rounding by the allocator)
	Limit      int64  // the budget or device capacity that refused it; 0 if unknown
	Reserved   int64  // bytes the allocator holds from the device
	Active     int64  // bytes in blocks handed out
	Cached     int64  // bytes held free for reuse
	DeviceFree int64  // free bytes the device reported; -1 if unknown
	// LargestCached is the allocator's largest cached block: with Cached
	// large and LargestCached below Requested, the cache is fragmented.
	LargestCached int64
	// OtherReserved is what the tracker's other allocators (pools, direct
	// allocators, adopted memory) hold on the device; 0 if untracked.
	OtherReserved int64
	// Promised is what the allocator's open admissions (pool.Pool.Admit)
	// reserve and have not drawn yet, counted against its budget beside
	// Reserved; Admissions counts them. 0 without admissions.
	Promised   int64
	Admissions int64
	// Outside is the device's used memory that no tensorlife allocator
	// holds: used - Reserved - OtherReserved. -1 if unknown.
	Outside int64
	// DeviceTotal is the device's total memory; 0 if unknown.
	DeviceTotal int64
	// Reason says which limit refused: "budget" or "device".
	Reason string
	// TopSites are the live call sites holding the most bytes, largest
	// first; their bytes are before an allocator rounds them (Active after).
	TopSites []track.SiteStats
	// HeldBy names, per TopSites entry, the extra owners (View, Retain, a
	// cache entry) holding its memory, most handles first (Books.HeldBy).
	HeldBy [][]track.Holder
	// Requests are the tracker's open requests when memory ran out, with
	// the few holding most in flight (Largest; the text cuts each one's
	// labels at 120 bytes) and what the others hold: the rows and the
	// others make Requests.InFlightBytes. Facts, not leaks: a request in
	// flight is never judged.
	Requests track.OpenRequests
	// Err is the underlying device error, if the device refused.
	Err error
}

func (e *OOMError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tensor: out of memory on %s: requested %s", e.Device, format.Bytes(e.Requested))
	if e.Limit > 0 {
		fmt.Fprintf(&b, ", %s limit %s", e.Reason, format.Bytes(e.Limit))
	} else if e.Reason != "" {
		fmt.Fprintf(&b, " (%s refused)", e.Reason)
	}
	row := func(name, format string, args ...any) {
		fmt.Fprintf(&b, "\n  %-20s", name)
		fmt.Fprintf(&b, format, args...)
	}
	row("reserved", "%s: active %s, cached %s, largest cached block %s",
		format.Bytes(e.Reserved), format.Bytes(e.Active), format.Bytes(e.Cached), format.Bytes(e.LargestCached))
	if e.Promised > 0 {
		row("admissions", "%s reserved for %d admitted requests, not yet drawn", format.Bytes(e.Promised), e.Admissions)
	}
	if e.OtherReserved > 0 {
		row("other allocators", "%s reserved on %s by other tensorlife allocators", format.Bytes(e.OtherReserved), e.Device)
	}
	if e.Outside >= 0 {
		row("outside tensorlife", "%s used on %s by memory tensorlife does not hold", format.Bytes(e.Outside), e.Device)
	}
	if e.DeviceFree >= 0 {
		if e.DeviceTotal > 0 {
			row("free on device", "%s of %s", format.BytesOf(e.DeviceFree, e.DeviceTotal), format.Bytes(e.DeviceTotal))
		} else {
			row("free on device", "%s", format.Bytes(e.DeviceFree))
		}
	}
	WriteSites(&b, "top live sites (tensor bytes, before the allocator rounds them)", e.TopSites, e.HeldBy)
	writeRequests(&b, "largest open requests", e.Requests, e.Requests.Largest, e.Limit)
	if e.Err != nil {
		fmt.Fprintf(&b, "\n  device: %v", e.Err)
	}
	return b.String()
}

// Is reports whether target is ErrOutOfMemory.
func (e *OOMError) Is(target error) bool { return target == ErrOutOfMemory }

// Unwrap returns the device error, if any.
func (e *OOMError) Unwrap() error { return e.Err }
