//go:build cuda

package cuda_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/tensorlife/tensorlife/internal/format"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/cu"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/cuda"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

// These tests need a GPU. A binary built with -tags cuda exits at start on a
// machine without a driver (gorgonia.org/cu's init), so skipping covers only
// a driver without device 0; where the environment configures the fake
// driver, a device that does not open fails the test (tensortest.NoDevice).

// openDevice opens device 0, or ends tb as tensortest.NoDevice does, and
// closes the device when tb ends.
func openDevice(tb testing.TB, opts ...cuda.Option) *cuda.Device {
	tb.Helper()
	d, err := cuda.Open(0, opts...)
	if err != nil {
		tensortest.NoDevice(tb, 0, "no CUDA device: %v", err)
	}
	tb.Cleanup(func() {
		blocks, bytes := d.Outstanding()
		assert.Zero(tb, blocks, "blocks left allocated (%d bytes)", bytes)
		assert.NoError(tb, d.Close())
	})
	return d
}

func TestCUDAConformance(t *testing.T) {
	assert.True(t, cuda.Enabled)
	// The limit makes MemInfo move with the suite's allocations only, even
	// if other processes share the GPU.
	tensortest.Run(t, func(t *testing.T, capacity int64) tensor.Device {
		return openDevice(t, cuda.WithMemoryLimit(capacity))
	}, tensortest.WithCapacity(64<<20))
}

func TestCUDAName(t *testing.T) {
	d := openDevice(t)
	assert.Equal(t, "cuda:0", d.Name())
	_, err := cuda.Open(1 << 20)
	require.ErrorIs(t, err, tensor.ErrNoDevice)
	assert.Contains(t, err.Error(), "cuda:1048576")
}

// The driver's own CUDA_ERROR_OUT_OF_MEMORY, not the limit's.
func TestCUDADriverOutOfMemory(t *testing.T) {
	d := openDevice(t)
	_, total, err := d.MemInfo()
	require.NoError(t, err)
	_, err = d.Alloc(total + 1)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	var drvErr *cuda.DriverError
	require.ErrorAs(t, err, &drvErr)
	assert.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", drvErr.Name)
	assert.True(t, errors.Is(err, tensor.ErrOutOfMemory))
	t.Log(err)
}

// A goroutine that locked itself to a thread with a context of its own gets
// that context back after each call, and the Device still uses its own.
func TestCUDAKeepsCallersContext(t *testing.T) {
	d := openDevice(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	dev, err := cu.GetDevice(0)
	require.NoError(t, err)
	own, err := dev.MakeContext(cu.SchedAuto) // made current on this thread
	require.NoError(t, err)
	defer own.Destroy()
	require.NoError(t, cu.SetCurrentContext(own))

	p, err := d.Alloc(1 << 20)
	require.NoError(t, err)
	require.NoError(t, d.CopyToDevice(p, make([]byte, 1<<20)))

	cur, err := cu.CurrentContext()
	require.NoError(t, err)
	assert.Equal(t, own, cur, "the caller's context was not put back")

	// The block lives in the Device's context: freeing it from a
	// goroutine with nothing current works.
	done := make(chan error)
	go func() { done <- d.Free(p, 1<<20) }()
	require.NoError(t, <-done)
}

// Closing the last holder of the primary context destroys it, while OS
// threads may still have it current; a Device opened afterwards must work
// from any goroutine all the same.
func TestCUDAReopen(t *testing.T) {
	for round := range 3 {
		d, err := cuda.Open(0)
		if err != nil {
			tensortest.NoDevice(t, 0, "no CUDA device: %v", err)
		}
		errs := make(chan error, 8)
		for range cap(errs) {
			go func() {
				p, err := d.Alloc(4096)
				if err == nil {
					err = errors.Join(d.Memset(p, byte(round), 4096), d.Free(p, 4096))
				}
				errs <- err
			}()
		}
		for range cap(errs) {
			assert.NoError(t, <-errs, "round %d", round)
		}
		require.NoError(t, d.Close())
	}
}

// BenchmarkDeviceAllocFree measures a raw cuMemAlloc+cuMemFree pair through a
// Device, the cost a caching pool saves.
func BenchmarkDeviceAllocFree(b *testing.B) {
	for _, size := range []int64{4 << 10, 1 << 20, 64 << 20} {
		b.Run(strings.ReplaceAll(format.Bytes(size), " ", ""), func(b *testing.B) {
			d := openDevice(b)
			b.ReportAllocs()
			for b.Loop() {
				p, err := d.Alloc(size)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Free(p, size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeviceAllocFreeParallel is the same from GOMAXPROCS goroutines,
// which exercises the context binding on many threads at once.
func BenchmarkDeviceAllocFreeParallel(b *testing.B) {
	const size = 1 << 20
	d := openDevice(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := d.Alloc(size)
			if err != nil {
				b.Error(err)
				return
			}
			if err := d.Free(p, size); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
