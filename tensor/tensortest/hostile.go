package tensortest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/tensor"
)

// Hostile is a tensor.Device whose chosen methods panic, for the tests
// that hold tensorlife to running every call into a device under recover:
// a device is code tensorlife does not own. The other methods go to the
// wrapped device. Which methods panic may change at any time (Panic). It
// is safe for concurrent use.
type Hostile struct {
	inner    tensor.Device
	mu       sync.Mutex
	methods  []string // the methods that panic: "Name", "Alloc", ...
	panicked atomic.Int64
}

// NewHostile wraps inner with methods ("Name", "Alloc", "Free", "MemInfo",
// "CopyToDevice", "CopyToHost", "Memset", "UUID") panicking.
func NewHostile(inner tensor.Device, methods ...string) *Hostile {
	return &Hostile{inner: inner, methods: methods}
}

// Panic makes methods, and only them, panic from now on.
func (d *Hostile) Panic(methods ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.methods = methods
}

// Panicked returns how many calls panicked.
func (d *Hostile) Panicked() int64 { return d.panicked.Load() }

// maybe panics if method is one that panics.
func (d *Hostile) maybe(method string) {
	d.mu.Lock()
	hostile := slices.Contains(d.methods, method)
	d.mu.Unlock()
	if hostile {
		d.panicked.Add(1)
		panic(fmt.Sprintf("tensortest: hostile %s", method))
	}
}

// Name names the wrapped device.
func (d *Hostile) Name() string { d.maybe("Name"); return d.inner.Name() }

// Alloc allocates from the wrapped device.
func (d *Hostile) Alloc(bytes int64) (tensor.DevicePtr, error) {
	d.maybe("Alloc")
	return d.inner.Alloc(bytes)
}

// Free frees on the wrapped device.
func (d *Hostile) Free(p tensor.DevicePtr, bytes int64) error {
	d.maybe("Free")
	return d.inner.Free(p, bytes)
}

// MemInfo reports the wrapped device's memory.
func (d *Hostile) MemInfo() (free, total int64, err error) {
	d.maybe("MemInfo")
	return d.inner.MemInfo()
}

// CopyToDevice copies to the wrapped device.
func (d *Hostile) CopyToDevice(dst tensor.DevicePtr, src []byte) error {
	d.maybe("CopyToDevice")
	return d.inner.CopyToDevice(dst, src)
}

// CopyToHost copies from the wrapped device.
func (d *Hostile) CopyToHost(dst []byte, src tensor.DevicePtr) error {
	d.maybe("CopyToHost")
	return d.inner.CopyToHost(dst, src)
}

// Memset sets bytes on the wrapped device.
func (d *Hostile) Memset(dst tensor.DevicePtr, value byte, bytes int64) error {
	d.maybe("Memset")
	return d.inner.Memset(dst, value, bytes)
}

// UUID names hardware, as a CUDA device does: "hostile".
func (d *Hostile) UUID() string { d.maybe("UUID"); return "hostile" }
