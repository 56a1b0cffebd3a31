//go:build cuda

package pool_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/cuda"
)

// The pool on the CUDA device: CI runs these on the fake driver
// (scripts/fakecuda.sh), the GPU check on a real GPU.

// openCUDA opens device 0 capped at limit bytes, and checks when the test
// ends that the pool gave every block back.
func openCUDA(t *testing.T, limit int64) *cuda.Device {
	t.Helper()
	d, err := cuda.Open(0, cuda.WithMemoryLimit(limit))
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() {
		blocks, bytes := d.Outstanding()
		assert.Zero(t, blocks, "blocks left on the device (%d bytes)", bytes)
		assert.NoError(t, d.Close())
	})
	return d
}

// Tensors round-trip their bytes through pooled device memory, a released
// block is served again without the driver, and the budget refuses with an
// error naming the line that holds the memory.
func TestCUDAPool(t *testing.T) {
	dev := openCUDA(t, 64<<20)
	p := newPool(t, dev, pool.Budget(8<<20))
	ctx := context.Background()

	data := make([]float32, 1<<16)
	for i := range data {
		data[i] = float32(i) / 3
	}
	x, err := tensor.FromSlice(ctx, p, data, 256, 256)
	require.NoError(t, err)
	got, err := tensor.ToSlice[float32](x)
	require.NoError(t, err)
	assert.Equal(t, data, got)
	require.NoError(t, x.Free())

	before := p.Stats()
	y, err := tensor.New(ctx, p, tensor.Float32, 256, 256)
	require.NoError(t, err)
	after := p.Stats()
	assert.Equal(t, before.DeviceAllocs, after.DeviceAllocs, "a cached block of the class is reused")
	assert.Equal(t, before.Hits+1, after.Hits)

	_, err = holdCUDA(ctx, p, 8<<20)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	var oom *tensor.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Contains(t, err.Error(), "budget")
	assert.Contains(t, err.Error(), "TestCUDAPool", "the error names the line holding the budget")
	require.NoError(t, y.Free())

	require.NoError(t, p.Close())
	blocks, _ := dev.Outstanding()
	assert.Zero(t, blocks, "Close returned the cache to the driver")
}

//go:noinline
func holdCUDA(ctx context.Context, p *pool.Pool, bytes int) (*tensor.Tensor, error) {
	return tensor.New(ctx, p, tensor.Uint8, bytes)
}

// Many goroutines, none locked to a thread, allocating, writing, reading
// and freeing through one pool on the device: each driver call must find
// the context current on whatever thread it runs (run with -race).
func TestCUDAPoolConcurrent(t *testing.T) {
	dev := openCUDA(t, 256<<20)
	p := newPool(t, dev, pool.MaxCachedBytes(4<<20))
	ctx := context.Background()
	const workers, rounds = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				n := 512 + (w*rounds+r)*4099%(1<<20)
				x, err := tensor.New(ctx, p, tensor.Uint8, n)
				if !assert.NoError(t, err) {
					return
				}
				want := byte(w*rounds + r)
				ok := assert.NoError(t, x.Fill(want))
				out := make([]byte, n)
				ok = ok && assert.NoError(t, x.CopyToHost(out))
				ok = ok && assert.Equal(t, want, out[0]) && assert.Equal(t, want, out[n-1])
				ok = assert.NoError(t, x.Free()) && ok
				if !ok {
					return
				}
			}
		})
	}
	wg.Wait()
	s := p.Stats()
	assert.Zero(t, s.Active)
	assert.LessOrEqual(t, s.Cached, int64(4<<20))
	require.NoError(t, p.Close())
}
