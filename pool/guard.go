package pool

import (
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// The device is code tensorlife does not own: every call the pool makes
// into it runs under recover (track.Guard), so that a device whose method
// panics fails the one call with an error, counted on the pool's tracker,
// and neither the request that allocated nor the pool's books are left
// half done. Its name is read once, at New.

// deviceName reads dev's name under recover, for New, cut as a Meta's
// texts are (track.MaxMetaText: valid UTF-8, bounded): it is in every
// figure and error of the pool.
func deviceName(tr *track.Tracker, dev tensor.Device) (name string, err error) {
	if perr := track.Guard(tr, dev, "Name", func() { name = dev.Name() }); perr != nil {
		return "", &tensor.DeviceError{Op: "name", Err: perr}
	}
	name, _ = format.Text(name, track.MaxMetaText)
	return name, nil
}

// memInfo calls the device's MemInfo; a panic comes back as a
// *tensor.DeviceError matching tensor.ErrPanic.
func (p *Pool) memInfo() (free, total int64, err error) {
	return deviceMemInfo(p.tracker, p.dev, p.name)
}

func deviceMemInfo(tr *track.Tracker, dev tensor.Device, name string) (free, total int64, err error) {
	if perr := track.Guard(tr, dev, "MemInfo", func() { free, total, err = dev.MemInfo() }); perr != nil {
		return 0, 0, &tensor.DeviceError{Op: "meminfo", Device: name, Err: perr}
	}
	return free, total, err
}

// devAlloc calls the device's Alloc; a panic comes back as a
// *tensor.DeviceError matching tensor.ErrPanic, and the caller rolls back
// as for any error.
func (p *Pool) devAlloc(size int64) (ptr tensor.DevicePtr, err error) {
	if perr := track.Guard(p.tracker, p.dev, "Alloc", func() { ptr, err = p.dev.Alloc(size) }); perr != nil {
		return 0, &tensor.DeviceError{Op: "alloc", Device: p.name, Bytes: size, Err: perr}
	}
	return ptr, err
}

// devFree calls the device's Free; a panic comes back as a
// *tensor.DeviceError matching tensor.ErrPanic. The pool stops counting
// the block either way, as after any failed free.
func (p *Pool) devFree(ptr tensor.DevicePtr, size int64) (err error) {
	if perr := track.Guard(p.tracker, p.dev, "Free", func() { err = p.dev.Free(ptr, size) }); perr != nil {
		return &tensor.DeviceError{Op: "free", Device: p.name, Bytes: size, Err: perr}
	}
	return err
}
