package mask

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

var maskDTypes = []tensor.DType{tensor.Bool, tensor.Uint8, tensor.Float32, tensor.Float16, tensor.BFloat16}

// errCopy is what countingDevice returns when told to fail copies.
var errCopy = errors.New("injected copy failure")

// countingDevice counts what reaches the device: allocations, frees and
// bytes copied to it. It can also fail copies to the device.
type countingDevice struct {
	tensor.Device
	allocs, frees   atomic.Int64
	toDevice        atomic.Int64 // bytes
	toDeviceCalls   atomic.Int64
	failCopiesAfter atomic.Int64 // fail copies once toDeviceCalls passes this; 0: never
}

func (d *countingDevice) Alloc(bytes int64) (tensor.DevicePtr, error) {
	p, err := d.Device.Alloc(bytes)
	if err == nil {
		d.allocs.Add(1)
	}
	return p, err
}

func (d *countingDevice) Free(p tensor.DevicePtr, bytes int64) error {
	err := d.Device.Free(p, bytes)
	if err == nil {
		d.frees.Add(1)
	}
	return err
}

func (d *countingDevice) CopyToDevice(dst tensor.DevicePtr, src []byte) error {
	n := d.toDeviceCalls.Add(1)
	if f := d.failCopiesAfter.Load(); f > 0 && n > f {
		return errCopy
	}
	d.toDevice.Add(int64(len(src)))
	return d.Device.CopyToDevice(dst, src)
}

// live returns the device blocks allocated and not freed.
func (d *countingDevice) live() int64 { return d.allocs.Load() - d.frees.Load() }

// env is a tracked allocator over a counting host device.
type env struct {
	dev   *countingDevice
	tr    *track.Tracker
	alloc tensor.Allocator
	// checks are the tracktest options of the end-of-test check: a test
	// that double frees on purpose adds tracktest.AllowMisuse().
	checks []tracktest.Option
}

// newEnv returns an env that checks, when the test ends, that nothing it
// allocated is still live; opts are its tracker's, after its Name.
func newEnv(t testing.TB, opts ...track.Option) *env {
	t.Helper()
	host, err := tensor.NewHostDevice(256 << 20)
	require.NoError(t, err)
	dev := &countingDevice{Device: host}
	tr, err := track.New(append([]track.Option{track.Name(t.Name())}, opts...)...)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	e := &env{dev: dev, tr: tr, alloc: alloc}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		tracktest.VerifyNone(t, tr, e.checks...)
		if n := dev.live(); n != 0 {
			t.Errorf("%d device blocks still allocated at the end of the test", n)
		}
	})
	return e
}

func (e *env) builder(t testing.TB, opts ...BuilderOption) *Builder {
	t.Helper()
	b, err := NewBuilder(e.alloc, opts...)
	require.NoError(t, err)
	return b
}

// readBytes copies a tensor's bytes to the host.
func readBytes(t testing.TB, m *tensor.Tensor) []byte {
	t.Helper()
	buf := make([]byte, m.Bytes())
	require.NoError(t, m.CopyToHost(buf))
	return buf
}

func free(t testing.TB, m interface{ Free() error }) {
	t.Helper()
	require.NoError(t, m.Free())
}

// callerLine returns the line of the call to callerLine.
func callerLine() int {
	_, _, line, _ := runtime.Caller(1)
	return line
}
