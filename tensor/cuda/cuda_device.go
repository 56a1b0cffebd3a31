//go:build cuda

package cuda

import (
	"fmt"
	"reflect"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/tensorlife/tensorlife/tensor"
)

// Enabled reports whether this binary was built with CUDA support (the cuda
// build tag). When it is false, Open always fails.
const Enabled = true

// The result codes errors.go maps must be cuda.h's: each line fails to
// compile (constant index out of range) if its two values differ.
var (
	_ = [1]struct{}{}[int(cu.InvalidValue)-resultInvalidValue]
	_ = [1]struct{}{}[int(cu.OutOfMemory)-resultOutOfMemory]
	_ = [1]struct{}{}[int(cu.NotInitialized)-resultNotInitialized]
	_ = [1]struct{}{}[int(cu.Deinitialized)-resultDeinitialized]
	_ = [1]struct{}{}[int(cu.NoDevice)-resultNoDevice]
	_ = [1]struct{}{}[int(cu.InvalidDevice)-resultInvalidDevice]
	_ = [1]struct{}{}[int(cu.InvalidContext)-resultInvalidContext]
	_ = [1]struct{}{}[int(cu.ContextIsDestroyed)-resultContextIsDestroyed]
)

// Open opens the CUDA device with the given ordinal (0 for the first GPU) and
// retains its primary context, the one the CUDA runtime and other libraries
// in the process share. Close the Device to release it.
//
// Open fails with an error matching tensor.ErrNoDevice when there is no such
// device or its context cannot be created. It cannot report a missing driver:
// gorgonia.org/cu initializes the driver when the program starts and exits
// the process if that fails (see the package documentation).
func Open(ordinal int, opts ...Option) (*Device, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("cuda:%d", ordinal)
	drv, err := openDriver(ordinal)
	if err != nil {
		return nil, &tensor.DeviceError{Op: "open", Device: name, Err: err}
	}
	return newDevice(name, drv, cfg), nil
}

// cuDriver calls the CUDA driver through gorgonia.org/cu's plain functions
// (cu.MemAlloc, cu.MemFree, ...), which return every error; cu's Context
// type, whose frees return nothing and keep a sticky last error, is not used.
type cuDriver struct {
	dev cu.Device
	ctx cu.CUContext // the device's primary context, retained once
}

func openDriver(ordinal int) (*cuDriver, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("%w: counting devices: %w", tensor.ErrNoDevice, driverError("open", err))
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("%w: no CUDA device %d (%d present)", tensor.ErrNoDevice, ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", tensor.ErrNoDevice, driverError("open", err))
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("%w: retaining the primary context: %w", tensor.ErrNoDevice, driverError("open", err))
	}
	return &cuDriver{dev: dev, ctx: ctx}, nil
}

// bind prepares the calling goroutine for a driver call on d's context. The
// driver keeps the current context per OS thread, while Go moves goroutines
// between threads at any point, even between two cgo calls: so bind locks
// the goroutine to its thread, makes the context current there if it is not
// already, and returns what was current before. unbind must follow, on the
// same goroutine.
//
// This costs one cgo call (cuCtxGetCurrent) per operation once a thread has
// the context current, and needs no goroutine of its own; calls from
// different goroutines run in parallel on their own threads. A thread's
// previous context is put back only when it had one: a goroutine that locked
// itself to a thread to use its own context gets it back, while threads that
// had none keep ours current, which makes the next call on them cheap.
func (d *cuDriver) bind() (prev cu.CUContext, err error) {
	runtime.LockOSThread()
	prev, err = cu.CurrentContext()
	if err == nil && prev != d.ctx {
		err = cu.SetCurrentContext(d.ctx)
	}
	if err != nil {
		runtime.UnlockOSThread()
	}
	return prev, err
}

func (d *cuDriver) unbind(prev cu.CUContext) {
	if prev != d.ctx && prev != (cu.CUContext{}) {
		// This can only fail if prev was destroyed meanwhile; then there
		// is nothing to put back.
		_ = cu.SetCurrentContext(prev)
	}
	runtime.UnlockOSThread()
}

func (d *cuDriver) alloc(bytes int64) (tensor.DevicePtr, error) {
	prev, err := d.bind()
	if err != nil {
		return 0, driverError("alloc", err)
	}
	defer d.unbind(prev)
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		return 0, driverError("alloc", err)
	}
	return tensor.DevicePtr(p), nil
}

func (d *cuDriver) free(p tensor.DevicePtr) error {
	prev, err := d.bind()
	if err != nil {
		return driverError("free", err)
	}
	defer d.unbind(prev)
	return driverError("free", cu.MemFree(cu.DevicePtr(p)))
}

func (d *cuDriver) memInfo() (free, total int64, err error) {
	prev, err := d.bind()
	if err != nil {
		return 0, 0, driverError("meminfo", err)
	}
	defer d.unbind(prev)
	free, total, err = cu.MemInfo()
	return free, total, driverError("meminfo", err)
}

func (d *cuDriver) copyToDevice(dst tensor.DevicePtr, src []byte) error {
	prev, err := d.bind()
	if err != nil {
		return driverError("copy to device", err)
	}
	defer d.unbind(prev)
	// src holds no Go pointers, so cgo lets the driver read it in place.
	err = cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(unsafe.SliceData(src)), int64(len(src)))
	return driverError("copy to device", err)
}

func (d *cuDriver) copyToHost(dst []byte, src tensor.DevicePtr) error {
	prev, err := d.bind()
	if err != nil {
		return driverError("copy to host", err)
	}
	defer d.unbind(prev)
	err = cu.MemcpyDtoH(unsafe.Pointer(unsafe.SliceData(dst)), cu.DevicePtr(src), int64(len(dst)))
	return driverError("copy to host", err)
}

func (d *cuDriver) memset(dst tensor.DevicePtr, value byte, bytes int64) error {
	prev, err := d.bind()
	if err != nil {
		return driverError("memset", err)
	}
	defer d.unbind(prev)
	// cuMemsetD8 may return before the memory is set, but it runs on the
	// legacy default stream, as the copies do, so a later copy sees the
	// values. Waiting for it (cuCtxSynchronize) would also wait for every
	// kernel other code runs in the shared primary context.
	return driverError("memset", cu.MemsetD8(cu.DevicePtr(dst), value, bytes))
}

// release drops the Device's hold on the primary context. The driver
// destroys the context once no holder is left; threads that still have it
// current need not be told.
func (d *cuDriver) release() error {
	return driverError("close", d.dev.ReleasePrimaryCtx())
}

// driverError converts an error from gorgonia.org/cu into a *DriverError
// for op. cu's result type is unexported, so the code is read with reflect;
// this runs on error paths only. nil stays nil.
func driverError(op string, err error) error {
	if err == nil {
		return nil
	}
	if v := reflect.ValueOf(err); v.Kind() == reflect.Int && v.Type().PkgPath() == "gorgonia.org/cu" {
		return newDriverError(op, int(v.Int()), err.Error())
	}
	return err
}
