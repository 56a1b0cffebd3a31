package tensor_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
)

func TestHostDeviceCapacityAndPointers(t *testing.T) {
	dev, err := tensor.NewHostDevice(1000)
	require.NoError(t, err)
	p, err := dev.Alloc(600)
	require.NoError(t, err)
	free, total, err := dev.MemInfo()
	require.NoError(t, err)
	assert.EqualValues(t, 400, free)
	assert.EqualValues(t, 1000, total)

	_, err = dev.Alloc(500)
	assert.ErrorIs(t, err, tensor.ErrOutOfMemory)
	var de *tensor.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "alloc", de.Op)
	assert.EqualValues(t, 500, de.Bytes)

	assert.ErrorIs(t, dev.Free(p+1, 600), tensor.ErrInvalidPointer, "interior pointer")
	assert.ErrorIs(t, dev.Free(p, 599), tensor.ErrSizeMismatch)
	assert.ErrorIs(t, dev.CopyToDevice(p.Add(590), make([]byte, 20)), tensor.ErrSizeMismatch)
	require.NoError(t, dev.Free(p, 600))
	assert.ErrorIs(t, dev.Free(p, 600), tensor.ErrInvalidPointer, "double free")
	assert.ErrorIs(t, dev.CopyToHost(make([]byte, 1), p), tensor.ErrInvalidPointer, "use after free")
	_, err = dev.Alloc(-5)
	assert.ErrorIs(t, err, tensor.ErrInvalidSize)
	assert.ErrorIs(t, dev.Memset(p, 0, -1), tensor.ErrInvalidSize)
	assert.EqualValues(t, 0, dev.Used())
}

func TestHostDeviceConcurrentUse(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256)
			for i := range 200 {
				p, err := dev.Alloc(256)
				if !assert.NoError(t, err) {
					return
				}
				buf[0], buf[255] = byte(g), byte(i)
				assert.NoError(t, dev.CopyToDevice(p, buf))
				out := make([]byte, 256)
				assert.NoError(t, dev.CopyToHost(out, p))
				assert.Equal(t, buf, out)
				assert.NoError(t, dev.Free(p, 256))
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 0, dev.Used())
	assert.Equal(t, 0, dev.Blocks())
}

func TestHostDeviceCountsBlocksAcrossReusedIDs(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	for range 1100 { // enough freed ids that the next allocations reuse them
		p, err := dev.Alloc(8)
		require.NoError(t, err)
		require.NoError(t, dev.Free(p, 8))
	}
	assert.Equal(t, 0, dev.Blocks())
	var ps []tensor.DevicePtr
	for range 3 {
		p, err := dev.Alloc(8)
		require.NoError(t, err)
		ps = append(ps, p)
	}
	assert.Equal(t, 3, dev.Blocks())
	require.NoError(t, dev.Free(ps[1], 8))
	assert.ErrorIs(t, dev.Free(ps[1], 8), tensor.ErrInvalidPointer)
	assert.Equal(t, 2, dev.Blocks(), "a refused free counts nothing")
	require.NoError(t, dev.Free(ps[0], 8))
	require.NoError(t, dev.Free(ps[2], 8))
	assert.Equal(t, 0, dev.Blocks())
	assert.ErrorIs(t, dev.Free(tensor.DevicePtr(1<<60), 8), tensor.ErrInvalidPointer, "an id past the table")
}

func TestDeviceNameOption(t *testing.T) {
	dev, err := tensor.NewHostDevice(1<<10, tensor.DeviceName("host:1"))
	require.NoError(t, err)
	assert.Equal(t, "host:1", dev.Name())
	for _, bad := range []tensor.Option{nil, tensor.DeviceName(""), tensor.DeviceName("two words"),
		tensor.DeviceName(string(make([]byte, tensor.MaxDeviceName+1)))} {
		_, err := tensor.NewHostDevice(1<<10, bad)
		assert.ErrorIs(t, err, tensor.ErrInvalidOption)
	}
}

func TestDeviceAllocatorReportsReserved(t *testing.T) {
	_, tr, alloc := setup(t, 1<<20)
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 1000)
	require.NoError(t, err)
	s := alloc.Stats()
	assert.Equal(t, tensor.AllocatorStats{Device: "host", Reserved: 1000, Peak: 1000, Blocks: 1, Allocs: 1}, s)
	assert.Equal(t, int64(1000), tr.ReservedOn("host"))
	require.NoError(t, x.Free())
	assert.Zero(t, alloc.Stats().Reserved)
	assert.Equal(t, int64(1), alloc.Stats().Frees)
}

// HostBytes is the block's own memory: what host code writes there, the
// device's copies read, and the other way round; a pointer the device did
// not hand out, or took back, is refused.
func TestHostDeviceHostBytesAreTheBlock(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 10)
	require.NoError(t, err)
	var _ tensor.HostMemory = dev
	p, err := dev.Alloc(16)
	require.NoError(t, err)

	mem, err := dev.HostBytes(p.Add(4), 8)
	require.NoError(t, err)
	require.Len(t, mem, 8)
	assert.Equal(t, 8, cap(mem), "the slice cannot reach past the range")
	copy(mem, "tensorli")
	got := make([]byte, 16)
	require.NoError(t, dev.CopyToHost(got, p))
	assert.Equal(t, "\x00\x00\x00\x00tensorli\x00\x00\x00\x00", string(got))
	require.NoError(t, dev.Memset(p, 'x', 16))
	assert.Equal(t, "xxxxxxxx", string(mem))

	_, err = dev.HostBytes(p.Add(4), 13)
	assert.ErrorIs(t, err, tensor.ErrSizeMismatch)
	_, err = dev.HostBytes(p, -1)
	assert.ErrorIs(t, err, tensor.ErrInvalidSize)
	require.NoError(t, dev.Free(p, 16))
	_, err = dev.HostBytes(p, 16)
	assert.ErrorIs(t, err, tensor.ErrInvalidPointer)
	var de *tensor.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "host bytes", de.Op)
}
