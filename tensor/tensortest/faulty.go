package tensortest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/tensorlife/tensorlife/internal/option"
	"github.com/tensorlife/tensorlife/tensor"
)

// ErrInjected is what every failure this package injects wraps. An injected
// allocation failure is a *tensor.DeviceError whose cause matches
// ErrInjected and, unless WithoutOOM was given, tensor.ErrOutOfMemory.
var ErrInjected = errors.New("tensortest: injected failure")

// ErrInvalidOption means an option's value cannot be used.
var ErrInvalidOption = errors.New("tensortest: invalid option")

// Faulty is a tensor.Device that injects allocation failures into, and checks
// the frees passed to, the device it wraps. Create it with New. It is safe
// for concurrent use. To tell a double free from a free of a pointer it
// never handed out, it remembers each pointer freed until the wrapped
// device hands it out again: memory grows with the distinct addresses a
// test frees, which is fine for tests and why this is no production
// wrapper.
type Faulty struct {
	inner tensor.Device
	cfg   faultConfig

	mu          sync.Mutex
	rng         *rand.Rand // nil without FailFraction
	allocs      int64      // Alloc calls with a valid size, injected ones included
	injected    int64
	live        map[tensor.DevicePtr]int64 // pointer -> bytes, as handed out
	freed       map[tensor.DevicePtr]bool  // pointers freed and not handed out again
	bytes       int64
	doubleFrees int64
	badFrees    int64
}

// New wraps inner. Options choose which allocations fail; without any, the
// device injects nothing and only counts and checks.
func NewFaulty(inner tensor.Device, opts ...FaultOption) (*Faulty, error) {
	if inner == nil {
		return nil, fmt.Errorf("%w: nil device", tensor.ErrNilAllocator)
	}
	cfg := faultConfig{failNth: map[int64]bool{}, oom: true}
	if err := option.Apply(&cfg, opts, FaultOption.apply, ErrInvalidOption); err != nil {
		return nil, err
	}
	d := &Faulty{inner: inner, cfg: cfg, live: map[tensor.DevicePtr]int64{}, freed: map[tensor.DevicePtr]bool{}}
	if cfg.fraction > 0 {
		d.rng = rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9E3779B97F4A7C15))
	}
	return d, nil
}

// Inner returns the wrapped device.
func (d *Faulty) Inner() tensor.Device { return d.inner }

// Name returns the wrapped device's name, so reports read as they would
// without the wrapper.
func (d *Faulty) Name() string { return d.inner.Name() }

// Alloc fails if this call is chosen (FailNth, FailFraction) and otherwise
// allocates from the wrapped device. Calls with an invalid size go straight
// to the wrapped device, which refuses them, and are not counted.
func (d *Faulty) Alloc(bytes int64) (tensor.DevicePtr, error) {
	if bytes <= 0 {
		return d.inner.Alloc(bytes)
	}
	d.mu.Lock()
	d.allocs++
	n := d.allocs
	fail := d.cfg.failNth[n]
	if !fail && d.rng != nil {
		fail = d.rng.Float64() < d.cfg.fraction
	}
	if fail {
		d.injected++
	}
	d.mu.Unlock()
	if fail {
		cause := fmt.Errorf("%w (allocation %d)", ErrInjected, n)
		if d.cfg.oom {
			cause = fmt.Errorf("%w: %w", tensor.ErrOutOfMemory, cause)
		}
		return 0, &tensor.DeviceError{Op: "alloc", Device: d.Name(), Bytes: bytes, Err: cause}
	}

	p, err := d.inner.Alloc(bytes)
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	d.live[p] = bytes
	delete(d.freed, p)
	d.bytes += bytes
	d.mu.Unlock()
	return p, nil
}

// Free checks p and bytes against what Alloc handed out and passes the free
// on only if they match. A pointer freed before and not handed out again is
// a double free: it is counted (DoubleFrees) and refused with an error
// matching tensor.ErrInvalidPointer. An unknown pointer is refused the same
// way and counted by BadFrees; a wrong size is refused with
// tensor.ErrSizeMismatch and counted by BadFrees. Refused frees leave the
// block live.
func (d *Faulty) Free(p tensor.DevicePtr, bytes int64) error {
	d.mu.Lock()
	size, ok := d.live[p]
	switch {
	case !ok && d.freed[p]:
		d.doubleFrees++
		d.mu.Unlock()
		return d.err("free", bytes, fmt.Errorf("%w: double free of %#x", tensor.ErrInvalidPointer, uintptr(p)))
	case !ok:
		d.badFrees++
		d.mu.Unlock()
		return d.err("free", bytes, fmt.Errorf("%w: %#x was never allocated", tensor.ErrInvalidPointer, uintptr(p)))
	case size != bytes:
		d.badFrees++
		d.mu.Unlock()
		return d.err("free", bytes, fmt.Errorf("%w: block %#x holds %d bytes", tensor.ErrSizeMismatch, uintptr(p), size))
	}
	// Take the block out of the books before the wrapped device can hand the
	// same address to a concurrent Alloc.
	delete(d.live, p)
	d.freed[p] = true
	d.bytes -= size
	d.mu.Unlock()

	if err := d.inner.Free(p, bytes); err != nil {
		d.mu.Lock()
		d.live[p] = size
		delete(d.freed, p)
		d.bytes += size
		d.mu.Unlock()
		return err
	}
	return nil
}

// MemInfo reports the wrapped device's free and total bytes.
func (d *Faulty) MemInfo() (free, total int64, err error) { return d.inner.MemInfo() }

// CopyToDevice passes the copy to the wrapped device.
func (d *Faulty) CopyToDevice(dst tensor.DevicePtr, src []byte) error {
	return d.inner.CopyToDevice(dst, src)
}

// CopyToHost passes the copy to the wrapped device.
func (d *Faulty) CopyToHost(dst []byte, src tensor.DevicePtr) error {
	return d.inner.CopyToHost(dst, src)
}

// Memset passes the memset to the wrapped device.
func (d *Faulty) Memset(dst tensor.DevicePtr, value byte, bytes int64) error {
	return d.inner.Memset(dst, value, bytes)
}

// Outstanding returns the blocks and bytes allocated through d and not yet
// freed, in the order tensor/cuda's Faulty.Outstanding gives them.
func (d *Faulty) Outstanding() (blocks int, bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.live), d.bytes
}

// Allocs returns the number of Alloc calls with a valid size, failed ones
// included: the count FailNth refers to.
func (d *Faulty) Allocs() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.allocs
}

// Injected returns the number of allocations failed on purpose.
func (d *Faulty) Injected() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.injected
}

// DoubleFrees returns the number of frees of a pointer already freed.
func (d *Faulty) DoubleFrees() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.doubleFrees
}

// BadFrees returns the number of frees refused for an unknown pointer or a
// wrong size (double frees are counted by DoubleFrees instead).
func (d *Faulty) BadFrees() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.badFrees
}

func (d *Faulty) err(op string, bytes int64, cause error) error {
	return &tensor.DeviceError{Op: op, Device: d.Name(), Bytes: bytes, Err: cause}
}

var _ tensor.Device = (*Faulty)(nil)
