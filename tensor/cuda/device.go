package cuda

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/internal/heapfence"

	"github.com/tensorlife/tensorlife/tensor"
)

// driver is the part of the CUDA driver API a Device uses, for one device
// and its context. The real one (cuDriver, build tag cuda) wraps
// gorgonia.org/cu; tests use a fake. The Device validates every argument
// before calling: sizes are positive, pointers and ranges lie in blocks the
// driver handed out, and slices are not empty. Failures are returned as
// *DriverError.
//
// Implementations must be safe for concurrent use, except release, which the
// Device calls once, with no other call in flight.
type driver interface {
	alloc(bytes int64) (tensor.DevicePtr, error)
	free(p tensor.DevicePtr) error
	memInfo() (free, total int64, err error)
	copyToDevice(dst tensor.DevicePtr, src []byte) error
	copyToHost(dst []byte, src tensor.DevicePtr) error
	memset(dst tensor.DevicePtr, value byte, bytes int64) error
	release() error
}

// Device is the memory of one CUDA device, as a tensor.Device. Alloc and
// Free go straight to cuMemAlloc and cuMemFree: wrap a Device in a pool to
// cache blocks.
//
// A Device remembers every block it hands out, so that Free of a pointer it
// did not hand out (or already took back) fails with tensor.ErrInvalidPointer,
// and a copy or memset that runs past the end of its block fails with
// tensor.ErrSizeMismatch, both before the driver sees them. Every failure is
// a *tensor.DeviceError naming the operation, the size and the device; a
// driver failure carries a *DriverError.
//
// A Device is safe for concurrent use by any number of goroutines, which need
// not lock themselves to OS threads: see the package documentation for how
// the CUDA context follows them. Copies are synchronous: when CopyToHost
// returns, dst holds the data. Close releases the device; it must not be
// copied after first use.
type Device struct {
	name  string
	drv   driver
	limit int64 // WithMemoryLimit; 0 for none

	// life is held shared by every call that reaches the driver and
	// exclusively by Close, so the context is never released under a
	// running call.
	life   sync.RWMutex
	closed bool

	mu    sync.Mutex
	table allocTable
	used  int64 // table.bytes plus allocations in flight, for the limit

	// adoptions is the foreign memory adopted on the device
	// (foreign.Adopt): the device's own, so that Adopt refuses memory
	// adopted twice, in any tracker.
	adoptions tensor.LiveAdoptions
}

// Adoptions returns the device's record of the foreign memory adopted on
// it (tensor.AdoptionKeeper).
func (d *Device) Adoptions() *tensor.LiveAdoptions { return &d.adoptions }

func newDevice(name string, drv driver, cfg config) *Device {
	return &Device{name: name, drv: drv, limit: cfg.memoryLimit}
}

// Name returns "cuda:N", N being the device ordinal passed to Open.
func (d *Device) Name() string { return d.name }

// Alloc reserves bytes (> 0) of device memory with cuMemAlloc. The memory is
// not zeroed. Exhaustion, of the device or of WithMemoryLimit, fails with an
// error matching tensor.ErrOutOfMemory.
func (d *Device) Alloc(bytes int64) (tensor.DevicePtr, error) {
	const op = "alloc"
	if bytes <= 0 {
		return 0, d.fail(op, bytes, tensor.ErrInvalidSize)
	}
	c, err := d.enter(op, bytes)
	if err != nil {
		return 0, err
	}
	defer c.exit()

	// Reserve before calling the driver, so that concurrent Allocs cannot
	// overshoot the limit together.
	d.mu.Lock()
	if d.limit > 0 && bytes > d.limit-d.used {
		free := d.limit - d.used
		d.mu.Unlock()
		return 0, d.fail(op, bytes, fmt.Errorf("%w: %s free of a %s limit", tensor.ErrOutOfMemory, format.Bytes(free), format.Bytes(d.limit)))
	}
	d.used += bytes
	d.mu.Unlock()

	p, err := d.drv.alloc(bytes)

	d.mu.Lock()
	if err != nil {
		d.used -= bytes
	} else {
		d.table.insert(p, bytes)
	}
	d.mu.Unlock()
	if err != nil {
		return 0, d.fail(op, bytes, err)
	}
	return p, nil
}

// Free returns a block from Alloc with cuMemFree. bytes must be the size
// passed to Alloc: a different size fails with tensor.ErrSizeMismatch and
// leaves the block allocated. A pointer this Device did not hand out, or has
// already taken back, fails with tensor.ErrInvalidPointer.
func (d *Device) Free(p tensor.DevicePtr, bytes int64) error {
	const op = "free"
	if bytes <= 0 {
		return d.fail(op, bytes, tensor.ErrInvalidSize)
	}
	c, err := d.enter(op, bytes)
	if err != nil {
		return err
	}
	defer c.exit()

	// Forget the block before the driver call, so that two goroutines
	// freeing the same pointer cannot both reach cuMemFree.
	d.mu.Lock()
	size, ok := d.table.lookup(p)
	switch {
	case !ok:
		d.mu.Unlock()
		return d.fail(op, bytes, fmt.Errorf("%w: %#x was not allocated by this device, or was freed", tensor.ErrInvalidPointer, uintptr(p)))
	case size != bytes:
		d.mu.Unlock()
		return d.fail(op, bytes, fmt.Errorf("%w: block %#x holds %d bytes", tensor.ErrSizeMismatch, uintptr(p), size))
	}
	d.table.remove(p)
	d.mu.Unlock()

	if err := d.drv.free(p); err != nil {
		// The driver still holds the block: keep accounting for it, so
		// that Close tries again and the limit stays true.
		d.mu.Lock()
		d.table.insert(p, size)
		d.mu.Unlock()
		return d.fail(op, bytes, err)
	}
	d.mu.Lock()
	d.used -= size
	d.mu.Unlock()
	return nil
}

// MemInfo reports the device's free and total bytes (cuMemGetInfo), as seen
// by every process using the device. With WithMemoryLimit, both are capped
// by the limit.
func (d *Device) MemInfo() (free, total int64, err error) {
	const op = "meminfo"
	c, err := d.enter(op, 0)
	if err != nil {
		return 0, 0, err
	}
	defer c.exit()
	free, total, err = d.drv.memInfo()
	if err != nil {
		return 0, 0, d.fail(op, 0, err)
	}
	if d.limit > 0 {
		d.mu.Lock()
		left := max(d.limit-d.used, 0)
		d.mu.Unlock()
		free, total = min(free, left), min(total, d.limit)
	}
	return free, total, nil
}

// CopyToDevice copies src into device memory starting at dst, which may
// point inside a block (DevicePtr.Add). The range must lie in one block from
// this Device. An empty src copies nothing.
func (d *Device) CopyToDevice(dst tensor.DevicePtr, src []byte) error {
	const op = "copy to device"
	n := int64(len(src))
	if n == 0 {
		return nil
	}
	c, err := d.enterRange(op, dst, n)
	if err != nil {
		return err
	}
	defer c.exit()
	if err := d.drv.copyToDevice(dst, src); err != nil {
		return d.fail(op, n, err)
	}
	return nil
}

// CopyToHost copies len(dst) bytes of device memory starting at src, which
// may point inside a block. The range must lie in one block from this
// Device. An empty dst copies nothing.
func (d *Device) CopyToHost(dst []byte, src tensor.DevicePtr) error {
	const op = "copy to host"
	n := int64(len(dst))
	if n == 0 {
		return nil
	}
	c, err := d.enterRange(op, src, n)
	if err != nil {
		return err
	}
	defer c.exit()
	if err := d.drv.copyToHost(dst, src); err != nil {
		return d.fail(op, n, err)
	}
	return nil
}

// Memset sets bytes bytes starting at dst to value (cuMemsetD8). The range
// must lie in one block from this Device. Zero bytes sets nothing; a
// negative count fails with tensor.ErrInvalidSize.
func (d *Device) Memset(dst tensor.DevicePtr, value byte, bytes int64) error {
	const op = "memset"
	switch {
	case bytes < 0:
		return d.fail(op, bytes, tensor.ErrInvalidSize)
	case bytes == 0:
		return nil
	}
	c, err := d.enterRange(op, dst, bytes)
	if err != nil {
		return err
	}
	defer c.exit()
	if err := d.drv.memset(dst, value, bytes); err != nil {
		return d.fail(op, bytes, err)
	}
	return nil
}

// Outstanding reports the blocks this Device has handed out and not taken
// back, and their bytes. Use it to assert that a test or a shutdown left
// nothing behind.
func (d *Device) Outstanding() (blocks int, bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.table.spans), d.table.bytes
}

// Close frees every block still outstanding and releases the device's
// primary context. It waits for calls in progress; calls after it fail with
// tensor.ErrClosed, and so does a second Close. Pointers from this Device are
// invalid afterwards.
func (d *Device) Close() error {
	fenced := heapfence.EnterDevice() // Close calls the driver too
	defer heapfence.ExitDevice(fenced)
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed {
		return d.fail("close", 0, tensor.ErrClosed)
	}
	d.closed = true

	d.mu.Lock()
	spans := d.table.take()
	d.used = 0
	d.mu.Unlock()

	var freeErr error
	failed := 0
	for _, s := range spans {
		if err := d.drv.free(s.start); err != nil {
			if failed == 0 {
				freeErr = d.fail("free", s.size, err)
			}
			failed++
		}
	}
	if failed > 1 {
		freeErr = fmt.Errorf("%w (and %d more blocks failed to free)", freeErr, failed-1)
	}
	var releaseErr error
	if err := d.drv.release(); err != nil {
		releaseErr = d.fail("close", 0, err)
	}
	return errors.Join(freeErr, releaseErr)
}

// call is a call admitted to the driver by enter; exit ends it.
type call struct {
	d      *Device
	fenced bool // heapfence.EnterDevice admitted it
}

// exit ends the call: it releases life and the fence.
func (c call) exit() {
	c.d.life.RUnlock()
	heapfence.ExitDevice(c.fenced)
}

// enter admits a call that will reach the driver: it passes the fence that
// keeps cgo calls out of a heap dump (heapfence; a no-op unless a test
// searches for retainers), takes life shared, and fails if the Device is
// closed. On success the caller must exit the call.
func (d *Device) enter(op string, bytes int64) (call, error) {
	c := call{d: d, fenced: heapfence.EnterDevice()}
	d.life.RLock()
	if d.closed {
		c.exit()
		return call{}, d.fail(op, bytes, tensor.ErrClosed)
	}
	return c, nil
}

// enterRange is enter for a call on the n (> 0) bytes starting at p, which
// must lie in one live block.
func (d *Device) enterRange(op string, p tensor.DevicePtr, n int64) (call, error) {
	c, err := d.enter(op, n)
	if err != nil {
		return call{}, err
	}
	d.mu.Lock()
	s, off, ok := d.table.locate(p)
	d.mu.Unlock()
	switch {
	case !ok:
		err = fmt.Errorf("%w: %#x is in no block allocated by this device", tensor.ErrInvalidPointer, uintptr(p))
	case n > s.size-off:
		err = fmt.Errorf("%w: %d bytes at offset %d of a %d-byte block", tensor.ErrSizeMismatch, n, off, s.size)
	}
	if err != nil {
		c.exit()
		return call{}, d.fail(op, n, err)
	}
	return c, nil
}

func (d *Device) fail(op string, bytes int64, cause error) error {
	return &tensor.DeviceError{Op: op, Device: d.name, Bytes: bytes, Err: cause}
}
