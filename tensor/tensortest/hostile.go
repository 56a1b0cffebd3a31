package tensortest

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/tensor"
)

// Hostile is a tensor.Device whose chosen methods misbehave, for the tests
// that hold tensorlife to its rule for calls into a device, code it does
// not own: a chosen method panics (ActPanic), calls runtime.Goexit
// (ActGoexit), or blocks until Unblock (ActBlock), as Do (or Panic) sets.
// The other methods go to the wrapped
// device. Which methods misbehave, and how, may change at any time. It is
// safe for concurrent use.
type Hostile struct {
	inner    tensor.Device
	mu       sync.Mutex
	methods  []string // the methods that misbehave: "Name", "Alloc", ...
	act      Act
	gate     chan struct{} // closed by Unblock
	entered  chan string   // a method's name each time a call blocks
	panicked atomic.Int64
}

// Act is how a Hostile device's chosen methods misbehave.
type Act int

const (
	// ActPanic panics with a text naming the method.
	ActPanic Act = iota
	// ActGoexit calls runtime.Goexit, which no recover stops.
	ActGoexit
	// ActBlock blocks until Unblock.
	ActBlock
)

// NewHostile wraps inner with methods ("Name", "Alloc", "Free", "MemInfo",
// "CopyToDevice", "CopyToHost", "Memset", "UUID") panicking.
func NewHostile(inner tensor.Device, methods ...string) *Hostile {
	return &Hostile{inner: inner, methods: methods, gate: make(chan struct{}), entered: make(chan string, 1024)}
}

// Panic makes methods, and only them, panic from now on.
func (d *Hostile) Panic(methods ...string) { d.Do(ActPanic, methods...) }

// Do makes methods, and only them, misbehave as act from now on.
func (d *Hostile) Do(act Act, methods ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.methods, d.act = methods, act
}

// Unblock lets every call blocked by ActBlock, and every later one, go on.
func (d *Hostile) Unblock() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.gate:
	default:
		close(d.gate)
	}
}

// Entered receives a method's name each time a call of it blocks
// (ActBlock): what a test waits on to know the call is inside the device.
func (d *Hostile) Entered() <-chan string { return d.entered }

// Panicked returns how many calls panicked.
func (d *Hostile) Panicked() int64 { return d.panicked.Load() }

// maybe misbehaves if method is one that does.
func (d *Hostile) maybe(method string) {
	d.mu.Lock()
	hostile, act := slices.Contains(d.methods, method), d.act
	d.mu.Unlock()
	if !hostile {
		return
	}
	switch act {
	case ActGoexit:
		runtime.Goexit()
	case ActBlock:
		d.entered <- method
		<-d.gate
	default:
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
