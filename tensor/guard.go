package tensor

import (
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/internal/ownalloc"
	"github.com/tensorlife/tensorlife/track"
)

// A Device and an Allocator given to tensorlife are code it does not own:
// each call this package makes into a device (a DeviceAllocator's, a
// tensor's copies and fill) runs under recover (track.Guard). A method
// that panics fails its one call with a *DeviceError that matches
// ErrPanic, counted on the tracker (track.Totals.PartPanics), and nothing
// is counted for the operation that did not happen.

// deviceCall runs f, a call of method on dev, under recover, and returns
// f's error, or the panic as a *DeviceError of op on the device named name
// for bytes bytes.
func deviceCall(tr *track.Tracker, dev Device, method, op, name string, bytes int64, f func() error) (err error) {
	if perr := track.Guard(tr, dev, method, func() { err = f() }); perr != nil {
		return &DeviceError{Op: op, Device: name, Bytes: bytes, Err: perr}
	}
	return err
}

// deviceName reads dev's name under recover, cut as a Meta's texts are
// (track.MaxMetaText: valid UTF-8, bounded).
func deviceName(tr *track.Tracker, dev Device) (name string, err error) {
	err = deviceCall(tr, dev, "Name", "name", "", 0, func() error { name = dev.Name(); return nil })
	name, _ = format.Text(name, track.MaxMetaText)
	return name, err
}

// onDevice runs f on the tensor's device, both the allocator's Device and
// f under recover; op and bytes name the operation in a panic's error.
func (t *Tensor) onDevice(method, op string, bytes int64, f func(Device) error) error {
	b := t.blk()
	tr := b.tracker()
	name := ""
	if m := b.meta(); m != nil {
		name = m.Device
	}
	var dev Device
	if perr := track.Guard(tr, b.alloc, "Device", func() { dev = b.alloc.Device() }); perr != nil {
		return &DeviceError{Op: op, Device: name, Bytes: bytes, Err: perr}
	}
	return deviceCall(tr, dev, method, op, name, bytes, func() error { return f(dev) })
}

// ownDeviceName returns the name of alloc's device if alloc is one of
// tensorlife's own allocators (DeviceAllocator, pool.Pool), which read it
// once, under recover, when they were made: from its mark, with no call
// into the allocator. Small enough to be inlined in New.
func ownDeviceName(alloc Allocator) (name string, ok bool) {
	if m, marked := alloc.(ownalloc.Marked[Allocator]); marked {
		return ownalloc.DeviceName(alloc, m)
	}
	return "", false
}

// allocDeviceName returns the name of alloc's device for New, which holds
// mem, bytes bytes of alloc's: from its mark if it is one of tensorlife's
// own (ownDeviceName); else it reads it, both calls under recover. A call
// that ends the goroutine (runtime.Goexit) gives mem back on its way out,
// as New gives it back after an error.
func allocDeviceName(tr *track.Tracker, alloc Allocator, mem Block, bytes int64) (name string, err error) {
	if name, ok := ownDeviceName(alloc); ok {
		return name, nil
	}
	returned := false
	defer func() {
		if !returned && bytes > 0 {
			_ = alloc.Release(mem) // the goroutine is ending: nobody to tell
		}
	}()
	name, err = foreignDeviceName(tr, alloc)
	returned = true
	return name, err
}

// ownMark is the mark of an allocator of this module (internal/ownalloc).
type ownMark = ownalloc.Mark[Allocator]

// foreignDeviceName reads the name of alloc's device, both calls under
// recover.
func foreignDeviceName(tr *track.Tracker, alloc Allocator) (name string, err error) {
	if perr := track.Guard(tr, alloc, "Device", func() { name = alloc.Device().Name() }); perr != nil {
		return "", &DeviceError{Op: "name", Err: perr}
	}
	return name, nil
}
