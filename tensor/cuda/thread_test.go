//go:build cuda

package cuda

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/cu"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

// These tests hold on a real GPU and on the fake driver (scripts/fakecuda.sh)
// alike: they are what the fake driver is for. The driver keeps the current
// context per OS thread, and Go moves goroutines between threads, so a
// driver call made without the Device's binding fails on a thread where the
// context was never made current.

// onOwnThread runs f on a goroutine locked to an OS thread that no other
// goroutine will use again: it never unlocks, so the thread exits with it
// and no later test inherits the context it leaves current.
func onOwnThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		f()
	}()
	<-done
}

// clearCurrent empties the calling thread's context stack. The thread may
// have run a Device call before, which leaves the context current.
func clearCurrent(t *testing.T) {
	for range 64 {
		cur, err := cu.CurrentContext()
		require.NoError(t, err)
		if cur == (cu.CUContext{}) {
			return
		}
		require.NoError(t, cu.SetCurrentContext(cu.CUContext{}))
	}
	t.Fatal("could not empty the thread's context stack")
}

// openDriverDevice opens device 0 and returns it with its driver.
func openDriverDevice(t *testing.T) (*Device, *cuDriver) {
	t.Helper()
	d, err := Open(0)
	if err != nil {
		tensortest.NoDevice(t, 0, "no CUDA device: %v", err)
	}
	t.Cleanup(func() { assert.NoError(t, d.Close()) })
	drv, ok := d.drv.(*cuDriver)
	require.True(t, ok, "Open must use the cgo driver")
	return d, drv
}

// requireCode checks that err is a *DriverError with the named code.
func requireCode(t *testing.T, err error, name string) *DriverError {
	t.Helper()
	require.Error(t, err)
	var de *DriverError
	require.ErrorAs(t, err, &de, "want a *DriverError, got %T: %v", err, err)
	assert.Equal(t, name, de.Name)
	return de
}

// A goroutine that made the context current and then ran on another thread
// (it was not locked, or it handed its work over) finds no context there:
// the driver fails the call with CUDA_ERROR_INVALID_CONTEXT, and the Device
// reports it as tensor.ErrNoDevice. Making the context current on that
// thread is the fix.
func TestUnboundCallFailsOnAnotherThread(t *testing.T) {
	_, drv := openDriverDevice(t)

	var p cu.DevicePtr
	onOwnThread(func() { // the thread the goroutine started on
		require.NoError(t, cu.SetCurrentContext(drv.ctx))
		var err error
		p, err = cu.MemAlloc(4096)
		require.NoError(t, err)
	})
	onOwnThread(func() { // the thread it resumed on
		clearCurrent(t)
		err := driverError("free", cu.MemFree(p))
		de := requireCode(t, err, "CUDA_ERROR_INVALID_CONTEXT")
		assert.Equal(t, resultInvalidContext, de.Code)
		assert.ErrorIs(t, err, tensor.ErrNoDevice)

		require.NoError(t, cu.SetCurrentContext(drv.ctx))
		assert.NoError(t, cu.MemFree(p), "with the context current the same free works")
	})
}

// Every call through a Device works from a thread that has no context
// current, and leaves the Device's context current there (so that the next
// call costs one cuCtxGetCurrent), but never a context the thread did not
// have before on a thread that had one (TestCUDAKeepsCallersContext).
func TestDeviceBindsOnAnyThread(t *testing.T) {
	d, drv := openDriverDevice(t)
	const n = 1 << 16
	onOwnThread(func() {
		clearCurrent(t)
		_, err := cu.MemAlloc(n)
		requireCode(t, driverError("alloc", err), "CUDA_ERROR_INVALID_CONTEXT")

		p, err := d.Alloc(n)
		require.NoError(t, err)
		cur, err := cu.CurrentContext()
		require.NoError(t, err)
		assert.Equal(t, drv.ctx, cur, "a thread with nothing current keeps the Device's context")

		clearCurrent(t)
		require.NoError(t, d.Memset(p, 7, n))
		clearCurrent(t)
		out := make([]byte, n)
		require.NoError(t, d.CopyToHost(out, p))
		assert.Equal(t, strings.Repeat("\x07", n), string(out))
		clearCurrent(t)
		require.NoError(t, d.Free(p, n))
	})
	blocks, _ := d.Outstanding()
	assert.Zero(t, blocks)
}

// unboundDriver is cuDriver with the bug the binding prevents: its alloc
// calls the driver without making the context current first.
type unboundDriver struct{ *cuDriver }

func (u unboundDriver) alloc(bytes int64) (tensor.DevicePtr, error) {
	p, err := cu.MemAlloc(bytes)
	return tensor.DevicePtr(p), driverError("alloc", err)
}

// A Device over a driver that forgets to bind fails, on a thread with no
// context, with an error that names the cause, rather than allocating in
// whatever context the thread happens to hold.
func TestMissingBindIsDetected(t *testing.T) {
	_, drv := openDriverDevice(t)
	buggy := newDevice("cuda:0", unboundDriver{drv}, config{})
	onOwnThread(func() {
		clearCurrent(t)
		_, err := buggy.Alloc(4096)
		require.ErrorIs(t, err, tensor.ErrNoDevice)
		requireCode(t, err, "CUDA_ERROR_INVALID_CONTEXT")
		assert.Contains(t, err.Error(), "cuda:0 alloc of 4 KiB")
	})
	blocks, _ := buggy.Outstanding()
	assert.Zero(t, blocks, "a failed Alloc records nothing")
}
