package foreign

import (
	"errors"
	"runtime/debug"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// Release functions (Memory.Release) are foreign code: a panic in one must
// not take the process down, and one that blocks must not hold anything of
// tensorlife's. callRelease runs one with the panic recovered; package
// tensor's release queue keeps them off the runtime's finalizer goroutine,
// whose blocking would stall every finalizer in the process, every leak
// report among them (see the package doc).

// callRelease calls release(p), returning its error or, if it panicked, a
// *PanicError, which it counts on tr unless tr is nil (Books.NotePanic).
// A release that calls runtime.Goexit ends the calling goroutine, as it
// would anywhere.
func callRelease(tr *track.Tracker, release func(tensor.DevicePtr) error, p tensor.DevicePtr) (err error) {
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			err = &PanicError{Func: "Memory.Release", Value: v,
				Stack: string(stack[:min(len(stack), maxPanicStack)])}
			if tr != nil {
				tr.Books().NotePanic("foreign.Memory", "Release", v)
			}
		}
	}()
	return release(p)
}

// deviceFigures reads the name and total memory of mem's device for
// Adopt, each call under recover (track.Guard): a device whose Name or
// MemInfo panics fails the Adopt with a *tensor.DeviceError matching
// ErrPanic and tensor.ErrPanic, and the memory stays the caller's.
func deviceFigures(tr *track.Tracker, mem Memory) (name string, total int64, err error) {
	dev := mem.Device
	if perr := track.Guard(tr, dev, "Name", func() { name = dev.Name() }); perr != nil {
		return "", 0, &tensor.DeviceError{Op: "name", Bytes: mem.Bytes, Err: perr}
	}
	name, _ = format.Text(name, track.MaxMetaText) // in every figure and error, as a Meta's texts

	if perr := track.Guard(tr, dev, "MemInfo", func() { _, total, err = dev.MemInfo() }); perr != nil {
		err = perr
	}
	if err != nil {
		return name, 0, &tensor.DeviceError{Op: "meminfo", Device: name, Bytes: mem.Bytes, Err: err}
	}
	return name, total, nil
}

// isPanic reports whether err is a recovered panic.
func isPanic(err error) bool {
	var pe *PanicError
	return errors.As(err, &pe)
}
