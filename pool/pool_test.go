package pool_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
)

func TestReuse(t *testing.T) {
	dev := newFault(t, 4<<20)
	p := newPool(t, dev)

	a, err := p.Allocate(3000)
	require.NoError(t, err)
	assert.Equal(t, int64(3072), a.Size, "3000 bytes round up to the 512-byte class 3072")
	require.NoError(t, p.Release(a))

	// Any request of the same class gets the cached block back.
	for _, n := range []int64{3000, 2561, 3072} {
		b, err := p.Allocate(n)
		require.NoError(t, err)
		assert.Equal(t, a.Ptr, b.Ptr, "request of %d bytes", n)
		assert.Equal(t, a.Size, b.Size)
		require.NoError(t, p.Release(b))
	}
	// Another class does not.
	c, err := p.Allocate(4096)
	require.NoError(t, err)
	assert.NotEqual(t, a.Ptr, c.Ptr)
	require.NoError(t, p.Release(c))

	s := requireBalanced(t, p, dev)
	assert.Equal(t, int64(3), s.Hits)
	assert.Equal(t, int64(2), s.Misses)
	assert.Equal(t, int64(2), s.DeviceAllocs)
	assert.Zero(t, s.DeviceFrees)
	assert.Zero(t, s.Active)
	assert.Equal(t, int64(3072+4096), s.Cached)
	assert.Equal(t, int64(2), s.CachedBlocks)
	assert.Equal(t, int64(4096), s.PeakActive)
	assert.Equal(t, int64(3072+4096), s.PeakReserved)

	require.NoError(t, p.Close())
	blocks, bytes := dev.Outstanding()
	assert.Zero(t, bytes)
	assert.Zero(t, blocks)
}

// Tensors drawn from a pool go through Allocate and Release, and the pool
// keeps the memory's bytes intact while a tensor holds it.
func TestTensorsThroughPool(t *testing.T) {
	dev := newFault(t, 4<<20)
	p := newPool(t, dev)
	ctx := context.Background()

	x, err := tensor.FromSlice(ctx, p, []float32{1, 2, 3, 4}, 2, 2)
	require.NoError(t, err)
	got, err := tensor.ToSlice[float32](x)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4}, got)
	assert.Equal(t, int64(512), p.Stats().Active, "16 bytes take one 512-byte block")
	require.NoError(t, x.Free())

	y, err := tensor.New(ctx, p, tensor.Float32, 4)
	require.NoError(t, err)
	s := requireBalanced(t, p, dev)
	assert.Equal(t, int64(1), s.Hits, "the second tensor reuses the first one's block")
	assert.Equal(t, int64(1), p.Tracker().Totals().LiveCount)
	require.NoError(t, y.Free())
	require.NoError(t, p.Close())
}

func TestAllocateRejectsBadSizes(t *testing.T) {
	p := newPool(t, newFault(t, 1<<20))
	for _, n := range []int64{0, -1, -1 << 40, 1<<62 + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			b, err := p.Allocate(n)
			assert.ErrorIs(t, err, tensor.ErrInvalidSize)
			assert.Zero(t, b)
		})
	}
	assert.Zero(t, p.Stats().Misses, "refused sizes never reach the device path")
}

func TestReleaseRefusesBadBlocks(t *testing.T) {
	dev := newFault(t, 4<<20)
	p := newPool(t, dev)
	other := newPool(t, dev)
	direct, err := tensor.NewDeviceAllocator(dev, nil)
	require.NoError(t, err)

	live, err := p.Allocate(1024)
	require.NoError(t, err)
	foreign, err := other.Allocate(1024)
	require.NoError(t, err)
	fromDevice, err := direct.Allocate(1024)
	require.NoError(t, err)

	wrongPtr := live
	wrongPtr.Ptr = wrongPtr.Ptr.Add(512)
	wrongSize := live
	wrongSize.Size = 2048
	badSlot := live
	badSlot.Tag |= 0xFFFFFF << 8

	cases := []struct {
		name  string
		block tensor.Block
		want  error
	}{
		{"block of another pool", foreign, tensor.ErrForeignBlock},
		{"block of a device allocator", fromDevice, tensor.ErrForeignBlock},
		{"zero block", tensor.Block{}, tensor.ErrForeignBlock},
		{"pointer inside the block", wrongPtr, tensor.ErrInvalidPointer},
		{"wrong size", wrongSize, tensor.ErrInvalidPointer},
		{"descriptor never made", badSlot, tensor.ErrInvalidPointer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, release(p, tc.block), tc.want)
		})
	}
	assert.Equal(t, int64(3), p.Stats().BadReleases, "foreign blocks are refused, not counted as misuse")

	// The refusals left the live block alone.
	s := p.Stats()
	assert.Equal(t, int64(1024), s.Active)
	require.NoError(t, p.Release(live))
	require.NoError(t, other.Release(foreign))
	require.NoError(t, direct.Release(fromDevice))
	require.NoError(t, other.Close())
	requireBalanced(t, p, dev)
}

func TestDoubleRelease(t *testing.T) {
	dev := newFault(t, 4<<20)
	p := newPool(t, dev)

	a, err := p.Allocate(1024)
	require.NoError(t, err)
	require.NoError(t, p.Release(a))
	err = release(p, a)
	assert.ErrorIs(t, err, tensor.ErrInvalidPointer)
	assert.Contains(t, err.Error(), "double release")

	// The same device block handed out again: the stale copy must not free
	// it from under its new owner.
	b, err := p.Allocate(1024)
	require.NoError(t, err)
	require.Equal(t, a.Ptr, b.Ptr)
	require.NotEqual(t, a.Tag, b.Tag, "a reused block carries a new generation")
	assert.ErrorIs(t, release(p, a), tensor.ErrInvalidPointer)
	assert.Equal(t, int64(1024), p.Stats().Active, "b is still handed out")

	// After the block went back to the device and the descriptor was
	// reused for another device block, a stale copy is refused too.
	require.NoError(t, p.Release(b))
	require.NoError(t, p.EmptyCache())
	c, err := p.Allocate(8192)
	require.NoError(t, err)
	assert.ErrorIs(t, release(p, b), tensor.ErrInvalidPointer)
	require.NoError(t, p.Release(c))

	s := requireBalanced(t, p, dev)
	assert.Equal(t, int64(3), s.BadReleases)
	require.NoError(t, p.Close())
}

func TestMaxCachedBytes(t *testing.T) {
	cases := []struct {
		name       string
		maxCached  int64
		wantCached int64
		wantEvict  int64
	}{
		{"caches nothing", 0, 0, 4},
		{"room for two 4 KiB blocks", 8 << 10, 8 << 10, 2},
		{"room for two and a half", 10 << 10, 8 << 10, 2},
		{"room for all", 1 << 20, 16 << 10, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dev := newFault(t, 4<<20)
			p := newPool(t, dev, pool.MaxCachedBytes(tc.maxCached))
			var blocks []tensor.Block
			for range 4 {
				b, err := p.Allocate(4096)
				require.NoError(t, err)
				blocks = append(blocks, b)
			}
			for _, b := range blocks {
				require.NoError(t, p.Release(b))
			}
			s := requireBalanced(t, p, dev)
			assert.Equal(t, tc.wantCached, s.Cached)
			assert.Equal(t, tc.wantEvict, s.Evictions)
			assert.Equal(t, tc.wantEvict, s.DeviceFrees)
			require.NoError(t, p.Close())
		})
	}
}

func TestEmptyCache(t *testing.T) {
	dev := newFault(t, 4<<20)
	p := newPool(t, dev)
	keep, err := p.Allocate(100 << 10)
	require.NoError(t, err)
	for _, n := range []int64{1, 5000, 70 << 10, 1<<20 + 1} {
		b, err := p.Allocate(n)
		require.NoError(t, err)
		require.NoError(t, p.Release(b))
	}
	require.Equal(t, int64(4), p.Stats().CachedBlocks)
	require.NoError(t, p.EmptyCache())

	s := requireBalanced(t, p, dev)
	assert.Zero(t, s.Cached)
	assert.Equal(t, int64(4), s.DeviceFrees)
	assert.Zero(t, s.Evictions, "EmptyCache is not an eviction")
	assert.Equal(t, keep.Size, s.Active, "blocks handed out stay")
	require.NoError(t, p.Release(keep))
	require.NoError(t, p.Close())
}

// Blocks above the largest class go to the device and back every time;
// large classes are cached like small ones.
func TestHugeBlocksAreNotCached(t *testing.T) {
	dev := newVirtualDevice(1 << 40)
	p := newPool(t, dev)

	large, err := p.Allocate(5<<30 + 1) // class 6 GiB
	require.NoError(t, err)
	assert.Equal(t, int64(6<<30), large.Size)
	require.NoError(t, p.Release(large))

	huge, err := p.Allocate(100<<30 + 1)
	require.NoError(t, err)
	assert.Equal(t, int64(100<<30+2<<20), huge.Size, "rounded up to 2 MiB")
	require.NoError(t, p.Release(huge))

	s := p.Stats()
	assert.Equal(t, int64(6<<30), s.Cached)
	assert.Equal(t, int64(1), s.DeviceFrees)
	assert.Zero(t, s.Evictions)
	assert.Equal(t, int64(6<<30), dev.used)
	require.NoError(t, p.Close())
	assert.Zero(t, dev.used)
}

func TestClose(t *testing.T) {
	dev := newFault(t, 4<<20)
	p := newPool(t, dev)
	ctx := context.Background()

	cached, err := tensor.New(ctx, p, tensor.Uint8, 2048)
	require.NoError(t, err)
	require.NoError(t, cached.Free())
	held, err := tensor.New(ctx, p, tensor.Float32, 1000) // the site Close must name
	require.NoError(t, err)

	err = p.Close()
	require.ErrorIs(t, err, pool.ErrActiveBlocks)
	var abe *pool.ActiveBlocksError
	require.ErrorAs(t, err, &abe)
	assert.Equal(t, int64(1), abe.Blocks)
	assert.Equal(t, int64(4096), abe.Bytes)
	require.Len(t, abe.Sites, 1)
	assert.Equal(t, "github.com/tensorlife/tensorlife/pool_test.TestClose", abe.Sites[0].Site.Location().Function)
	assert.Equal(t, int64(1), abe.Sites[0].LiveCount)
	assert.Equal(t, int64(4000), abe.Sites[0].LiveBytes)
	assert.Contains(t, err.Error(), "pool_test.go:")
	assert.Contains(t, err.Error(), "1 active blocks (4 KiB)")

	// The cache went back; the live tensor's block did not.
	blocks, bytes := dev.Outstanding()
	assert.Equal(t, int64(4096), bytes)
	assert.Equal(t, 1, blocks)
	data, err := tensor.ToSlice[float32](held)
	require.NoError(t, err, "a tensor alive at Close keeps working")
	assert.Len(t, data, 1000)

	_, err = p.Allocate(512)
	assert.ErrorIs(t, err, tensor.ErrClosed)
	_, err = tensor.New(ctx, p, tensor.Float32, 4)
	assert.ErrorIs(t, err, tensor.ErrClosed)
	assert.ErrorIs(t, p.Close(), tensor.ErrClosed)

	// A late free goes straight to the device: nothing leaks.
	require.NoError(t, held.Free())
	blocks, bytes = dev.Outstanding()
	assert.Zero(t, bytes)
	assert.Zero(t, blocks)
	s := requireBalanced(t, p, dev)
	assert.Zero(t, s.Reserved)
}

func TestCloseUntrackedNamesNoSites(t *testing.T) {
	dev := newFault(t, 1<<20)
	p, err := pool.New(dev, pool.Untracked())
	require.NoError(t, err)
	b, err := p.Allocate(100)
	require.NoError(t, err)
	err = p.Close()
	require.ErrorIs(t, err, pool.ErrActiveBlocks)
	assert.Contains(t, err.Error(), "untracked")
	require.NoError(t, p.Release(b))
	_, bytes := dev.Outstanding()
	assert.Zero(t, bytes)
}

func TestPoolStats(t *testing.T) {
	dev := newFault(t, 4<<20)
	p := newPool(t, dev, pool.Budget(2<<20))
	b, err := p.Allocate(1000)
	require.NoError(t, err)
	c, err := p.Allocate(1000)
	require.NoError(t, err)
	require.NoError(t, p.Release(b))

	var src report.PoolSource = p // what summaries and metrics read
	ps := src.Stats()
	assert.Equal(t, dev.Name(), ps.Device)
	assert.Equal(t, int64(2048), ps.Reserved)
	assert.Equal(t, int64(1024), ps.Active)
	assert.Equal(t, int64(1024), ps.Cached)
	assert.Equal(t, int64(2048), ps.PeakActive)
	assert.Equal(t, int64(2048), ps.PeakReserved)
	assert.Equal(t, int64(2<<20), ps.Limit)
	assert.Equal(t, int64(2), ps.DeviceAllocs)
	assert.Equal(t, int64(2), ps.Misses)
	assert.Equal(t, int64(1), ps.ActiveBlocks)
	assert.Equal(t, int64(1), ps.CachedBlocks)
	require.NoError(t, p.Release(c))
	require.NoError(t, p.Close())
}
