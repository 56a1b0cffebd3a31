package cuda

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

// openFake returns a Device over a fake driver with total bytes of memory.
func openFake(t *testing.T, total int64, opts ...Option) (*Device, *fakeDriver) {
	t.Helper()
	cfg, err := newConfig(opts)
	require.NoError(t, err)
	drv := newFakeDriver(total)
	d := newDevice("cuda:0", drv, cfg)
	t.Cleanup(func() { _ = d.Close() })
	return d, drv
}

// The Device logic above the driver passes the conformance suite, with
// out-of-memory coming from the driver...
func TestConformanceFakeDriver(t *testing.T) {
	tensortest.Run(t, func(t *testing.T, capacity int64) tensor.Device {
		d, _ := openFake(t, capacity)
		return d
	})
}

// ...and from WithMemoryLimit on a larger device.
func TestConformanceFakeDriverWithLimit(t *testing.T) {
	tensortest.Run(t, func(t *testing.T, capacity int64) tensor.Device {
		d, _ := openFake(t, 64*capacity, WithMemoryLimit(capacity))
		return d
	})
}

// Calls the Device can judge on its own never reach the driver.
func TestInvalidCallsNeverReachDriver(t *testing.T) {
	d, drv := openFake(t, 1<<20)
	p, err := d.Alloc(256)
	require.NoError(t, err)
	before := drv.callCounts()

	calls := map[string]error{
		"Alloc(0)":               func() error { _, err := d.Alloc(0); return err }(),
		"Free(unknown)":          d.Free(p.Add(4096), 256),
		"Free(interior)":         d.Free(p.Add(1), 256),
		"Free(wrong size)":       d.Free(p, 255),
		"Free(0 bytes)":          d.Free(p, 0),
		"CopyToDevice(overrun)":  d.CopyToDevice(p.Add(200), make([]byte, 57)),
		"CopyToHost(gap)":        d.CopyToHost(make([]byte, 1), p.Add(256)),
		"Memset(before a block)": d.Memset(p-1, 0, 1),
		"Memset(negative)":       d.Memset(p, 0, -1),
	}
	for name, err := range calls {
		assert.Error(t, err, name)
	}
	assert.Equal(t, before, drv.callCounts(), "refused calls reached the driver")
	require.NoError(t, d.Free(p, 256))
}

func TestDriverErrorsAreWrapped(t *testing.T) {
	d, drv := openFake(t, 1<<20)

	drv.fail("alloc", resultOutOfMemory)
	_, err := d.Alloc(4096)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	var de *tensor.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, tensor.DeviceError{Op: "alloc", Device: "cuda:0", Bytes: 4096, Err: de.Err}, *de)
	var drvErr *DriverError
	require.ErrorAs(t, err, &drvErr)
	assert.Equal(t, resultOutOfMemory, drvErr.Code)
	assert.Equal(t, "tensor: cuda:0 alloc of 4 KiB: cuda driver: CUDA_ERROR_INJECTED (2)", err.Error())

	// The failed Alloc reserved nothing.
	blocks, bytes := d.Outstanding()
	assert.Zero(t, blocks)
	assert.Zero(t, bytes)

	p, err := d.Alloc(4096)
	require.NoError(t, err)
	drv.fail("copy to host", resultInvalidValue)
	err = d.CopyToHost(make([]byte, 16), p)
	require.ErrorIs(t, err, tensor.ErrInvalidPointer)
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "copy to host", de.Op)
	assert.Equal(t, int64(16), de.Bytes)

	drv.fail("meminfo", 999)
	_, _, err = d.MemInfo()
	require.ErrorAs(t, err, &drvErr)
	assert.Equal(t, 999, drvErr.Code)
	assert.Nil(t, errors.Unwrap(drvErr), "an unknown code matches no sentinel")
	require.NoError(t, d.Free(p, 4096))
}

// A block the driver failed to free stays accounted for, and a retry works.
func TestFreeFailureKeepsBlock(t *testing.T) {
	d, drv := openFake(t, 1<<20, WithMemoryLimit(8192))
	p, err := d.Alloc(8192)
	require.NoError(t, err)

	drv.fail("free", resultInvalidContext)
	err = d.Free(p, 8192)
	require.ErrorIs(t, err, tensor.ErrNoDevice)
	blocks, bytes := d.Outstanding()
	assert.Equal(t, 1, blocks)
	assert.Equal(t, int64(8192), bytes)
	_, err = d.Alloc(1)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory, "the limit still counts the block")

	require.NoError(t, d.Free(p, 8192))
	blocks, _ = d.Outstanding()
	assert.Zero(t, blocks)
}

func TestMemoryLimit(t *testing.T) {
	d, _ := openFake(t, 1<<30, WithMemoryLimit(1000))
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, int64(1000), free)
	assert.Equal(t, int64(1000), total)

	p, err := d.Alloc(600)
	require.NoError(t, err)
	_, err = d.Alloc(401)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	assert.Contains(t, err.Error(), "400 B free of a 1000 B limit")
	q, err := d.Alloc(400)
	require.NoError(t, err)
	free, _, err = d.MemInfo()
	require.NoError(t, err)
	assert.Zero(t, free)
	require.NoError(t, d.Free(p, 600))
	require.NoError(t, d.Free(q, 400))

	// The device's own figures win when they are smaller.
	small, _ := openFake(t, 500, WithMemoryLimit(1000))
	free, total, err = small.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, int64(500), free)
	assert.Equal(t, int64(500), total)

	for _, bad := range []int64{0, -1} {
		_, err := newConfig([]Option{WithMemoryLimit(bad)})
		assert.ErrorIs(t, err, ErrInvalidOption)
		assert.ErrorContains(t, err, "WithMemoryLimit")
	}
	_, err = newConfig([]Option{nil})
	assert.ErrorIs(t, err, ErrInvalidOption, "a nil option is refused, not skipped")
}

func TestClose(t *testing.T) {
	d, drv := openFake(t, 1<<20)
	p, err := d.Alloc(100)
	require.NoError(t, err)
	_, err = d.Alloc(200)
	require.NoError(t, err)

	require.NoError(t, d.Close())
	drv.mu.Lock()
	assert.Empty(t, drv.blocks, "Close left blocks allocated")
	assert.True(t, drv.released, "Close did not release the context")
	drv.mu.Unlock()
	blocks, _ := d.Outstanding()
	assert.Zero(t, blocks)

	calls := map[string]error{
		"Alloc":        func() error { _, err := d.Alloc(1); return err }(),
		"Free":         d.Free(p, 100),
		"MemInfo":      func() error { _, _, err := d.MemInfo(); return err }(),
		"CopyToDevice": d.CopyToDevice(p, []byte{1}),
		"CopyToHost":   d.CopyToHost([]byte{1}, p),
		"Memset":       d.Memset(p, 0, 1),
		"Close":        d.Close(),
	}
	for name, err := range calls {
		assert.ErrorIs(t, err, tensor.ErrClosed, name)
	}
}

// Close waits for calls in flight; every call either completes or fails
// with ErrClosed, and nothing is left allocated.
func TestCloseWhileInUse(t *testing.T) {
	d, drv := openFake(t, 1<<30)
	var wg sync.WaitGroup
	var rounds atomic.Int64
	for range 8 {
		wg.Go(func() {
			for {
				rounds.Add(1)
				p, err := d.Alloc(64)
				if err != nil {
					assert.ErrorIs(t, err, tensor.ErrClosed)
					return
				}
				if err := d.CopyToDevice(p, make([]byte, 64)); err != nil {
					assert.ErrorIs(t, err, tensor.ErrClosed)
					return
				}
				if err := d.Free(p, 64); err != nil {
					assert.ErrorIs(t, err, tensor.ErrClosed)
					return
				}
			}
		})
	}
	for rounds.Load() < 8*100 { // the calls are in flight, not only started
		runtime.Gosched()
	}
	require.NoError(t, d.Close())
	wg.Wait()
	drv.mu.Lock()
	defer drv.mu.Unlock()
	assert.Empty(t, drv.blocks)
	assert.True(t, drv.released)
}

func TestCloseReportsFailures(t *testing.T) {
	d, drv := openFake(t, 1<<20)
	for range 3 {
		_, err := d.Alloc(100)
		require.NoError(t, err)
	}
	drv.mu.Lock()
	drv.released = true // every call fails from now on, as after a driver fault
	drv.mu.Unlock()
	err := d.Close()
	require.ErrorIs(t, err, tensor.ErrNoDevice)
	assert.Contains(t, err.Error(), "and 2 more blocks failed to free")
}

func TestDriverErrorClassification(t *testing.T) {
	tests := []struct {
		op   string
		code int
		want error
	}{
		{"alloc", resultOutOfMemory, tensor.ErrOutOfMemory},
		{"memset", resultOutOfMemory, tensor.ErrOutOfMemory},
		{"alloc", resultInvalidValue, tensor.ErrInvalidSize},
		{"free", resultInvalidValue, tensor.ErrInvalidPointer},
		{"copy to device", resultInvalidValue, tensor.ErrInvalidPointer},
		{"copy to host", resultInvalidValue, tensor.ErrInvalidPointer},
		{"memset", resultInvalidValue, tensor.ErrInvalidPointer},
		{"meminfo", resultInvalidValue, nil},
		{"alloc", resultNotInitialized, tensor.ErrNoDevice},
		{"free", resultDeinitialized, tensor.ErrNoDevice},
		{"open", resultNoDevice, tensor.ErrNoDevice},
		{"open", resultInvalidDevice, tensor.ErrNoDevice},
		{"alloc", resultInvalidContext, tensor.ErrNoDevice},
		{"alloc", resultContextIsDestroyed, tensor.ErrNoDevice},
		{"copy to host", 700, nil}, // CUDA_ERROR_ILLEGAL_ADDRESS: a kernel's fault
	}
	for _, tc := range tests {
		err := newDriverError(tc.op, tc.code, "X")
		assert.Equal(t, tc.want, errors.Unwrap(err), "%s, code %d", tc.op, tc.code)
	}
}

func TestCUDAErrorName(t *testing.T) {
	tests := map[string]string{
		"OutOfMemory":              "CUDA_ERROR_OUT_OF_MEMORY",
		"InvalidValue":             "CUDA_ERROR_INVALID_VALUE",
		"NoBinaryForGpu":           "CUDA_ERROR_NO_BINARY_FOR_GPU",
		"IllegalAddress":           "CUDA_ERROR_ILLEGAL_ADDRESS",
		"Assert":                   "CUDA_ERROR_ASSERT",
		"CUDA_ERROR_OUT_OF_MEMORY": "CUDA_ERROR_OUT_OF_MEMORY",
		"UnknownErrorCode:999":     "UnknownErrorCode:999",
		"":                         "",
	}
	for in, want := range tests {
		assert.Equal(t, want, cudaErrorName(in), in)
	}
}

func TestAllocTableLocate(t *testing.T) {
	var tab allocTable
	tab.insert(1000, 100)
	tab.insert(3000, 50)
	tab.insert(2000, 10)
	assert.Equal(t, int64(160), tab.bytes)

	tests := []struct {
		p      tensor.DevicePtr
		start  tensor.DevicePtr
		offset int64
		ok     bool
	}{
		{999, 0, 0, false},
		{1000, 1000, 0, true},
		{1099, 1000, 99, true},
		{1100, 0, 0, false},
		{2005, 2000, 5, true},
		{3049, 3000, 49, true},
		{3050, 0, 0, false},
		{^tensor.DevicePtr(0), 0, 0, false},
		{0, 0, 0, false},
	}
	for _, tc := range tests {
		s, off, ok := tab.locate(tc.p)
		assert.Equal(t, tc.ok, ok, "locate(%d)", tc.p)
		assert.Equal(t, tc.start, s.start, "locate(%d) start", tc.p)
		assert.Equal(t, tc.offset, off, "locate(%d) offset", tc.p)
	}

	size, ok := tab.lookup(2000)
	assert.True(t, ok)
	assert.Equal(t, int64(10), size)
	assert.False(t, tab.remove(2001))
	assert.True(t, tab.remove(2000))
	_, ok = tab.lookup(2000)
	assert.False(t, ok)
	assert.Equal(t, int64(150), tab.bytes)
	assert.Len(t, tab.take(), 2)
	assert.Zero(t, tab.bytes)
}
