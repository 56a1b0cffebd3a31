package pool_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
)

// hostilePool is a pool over a device whose chosen methods panic once the
// pool is made.
func hostilePool(t *testing.T, opts ...pool.Option) (*pool.Pool, *tensortest.Hostile, *track.Tracker) {
	t.Helper()
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	dev := tensortest.NewHostile(host)
	tr, err := track.New(track.Logger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	p, err := pool.New(dev, append(opts, pool.Tracker(tr))...)
	require.NoError(t, err)
	return p, dev, tr
}

// requirePanicError checks err is a recovered panic of op in a
// *tensor.DeviceError.
func requirePanicError(t *testing.T, err error, op string) {
	t.Helper()
	require.ErrorIs(t, err, tensor.ErrPanic)
	var de *tensor.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, op, de.Op)
}

// A device whose Alloc or Free panics on the request path fails that call
// with a typed error; the pool rolls the allocation back and counts
// nothing twice.
func TestPoolSurvivesAHostileDevice(t *testing.T) {
	ctx := context.Background()
	t.Run("Alloc panics", func(t *testing.T) {
		p, dev, tr := hostilePool(t)
		dev.Panic("Alloc")
		var err error
		require.NotPanics(t, func() { _, err = tensor.New(ctx, p, tensor.Uint8, 1000) })
		requirePanicError(t, err, "alloc")
		s := p.Stats()
		assert.Zero(t, s.Reserved, "the reservation rolled back")
		assert.Zero(t, s.DeviceAllocs)
		assert.Zero(t, s.Active)
		assert.EqualValues(t, 1, tr.Totals().PartPanics)
		assert.Zero(t, tr.Totals().LiveCount, "no tensor recorded")

		dev.Panic()
		x, err := tensor.New(ctx, p, tensor.Uint8, 1000)
		require.NoError(t, err, "the pool goes on")
		assert.EqualValues(t, 1, p.Stats().DeviceAllocs, "the failed call counted nowhere")
		assert.Equal(t, p.Stats().Reserved, p.Stats().Active)
		require.NoError(t, x.Free())
		require.NoError(t, p.Close())
	})
	t.Run("Free panics", func(t *testing.T) {
		p, dev, tr := hostilePool(t)
		x, err := tensor.New(ctx, p, tensor.Uint8, 1000)
		require.NoError(t, err)
		require.NoError(t, x.Free()) // cached: no device call
		dev.Panic("Free")
		require.NotPanics(t, func() { err = p.EmptyCache() })
		requirePanicError(t, err, "free")
		s := p.Stats()
		assert.Zero(t, s.Reserved, "the pool stops counting the block, as after any failed free")
		assert.EqualValues(t, 1, s.DeviceFrees, "counted once")
		assert.EqualValues(t, 1, tr.Totals().PartPanics)
		require.NoError(t, p.Close())
	})
	t.Run("Free panics on a release past the cache cap", func(t *testing.T) {
		p, dev, tr := hostilePool(t, pool.MaxCachedBytes(0))
		x, err := tensor.New(ctx, p, tensor.Uint8, 1000)
		require.NoError(t, err)
		dev.Panic("Free")
		require.NotPanics(t, func() { err = x.Free() })
		requirePanicError(t, err, "free")
		assert.Zero(t, p.Stats().Reserved)
		assert.Zero(t, tr.Totals().LiveCount, "the tensor is freed all the same")
		assert.EqualValues(t, 1, tr.Totals().PartPanics)
	})
	t.Run("MemInfo panics on Headroom", func(t *testing.T) {
		p, dev, _ := hostilePool(t)
		dev.Panic("MemInfo")
		budget, left := p.Headroom()
		assert.Zero(t, budget)
		assert.EqualValues(t, -1, left, "unknown")
	})
	t.Run("Name panics after New", func(t *testing.T) {
		// tensor.New takes the name the pool read when it was made, and
		// calls no Name.
		p, dev, tr := hostilePool(t)
		dev.Panic("Name")
		x, err := tensor.New(context.Background(), p, tensor.Uint8, 32)
		require.NoError(t, err)
		assert.Zero(t, dev.Panicked())
		assert.Zero(t, tr.Totals().PartPanics)
		classes := tr.Books().LiveByClass()
		require.Len(t, classes, 1)
		assert.Equal(t, "host", classes[0].Device)
		require.NoError(t, x.Free())
	})
	t.Run("Name panics at New", func(t *testing.T) {
		host, err := tensor.NewHostDevice(1 << 20)
		require.NoError(t, err)
		var p *pool.Pool
		require.NotPanics(t, func() { p, err = pool.New(tensortest.NewHostile(host, "Name")) })
		assert.Nil(t, p)
		requirePanicError(t, err, "name")
	})
}

// hostileReserver is another allocator on the tracker whose PartInfo
// panics.
type hostileReserver struct{ _ int }

func (*hostileReserver) PartInfo() track.PartInfo { panic("hostile PartInfo") }

// hugeReserver claims nearly all memory there is on the pool's device.
type hugeReserver struct{ _ int }

func (*hugeReserver) PartInfo() track.PartInfo {
	return track.PartInfo{Kind: "allocator", Device: "host", Reserved: math.MaxInt64 - 1, Left: -1}
}

// The out-of-memory path reads the other parts and the device: a panic in
// either is recovered and counted, and the allocation returns its
// out-of-memory error all the same, with no figure wrapped or negative.
func TestOutOfMemoryPathSurvivesHostileParts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		part    track.Part
		methods []string
		panics  int64
	}{
		{"another part's PartInfo panics", &hostileReserver{}, nil, 1},
		{"the device's MemInfo panics", nil, []string{"MemInfo"}, 1},
		{"both", &hostileReserver{}, []string{"MemInfo"}, 2},
		{"a huge claim beside the pool", &hugeReserver{}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, dev, tr := hostilePool(t, pool.Budget(4096))
			switch part := tc.part.(type) {
			case *hostileReserver:
				track.Attach(tr, part)
			case *hugeReserver:
				track.Attach(tr, part)
			}
			x, err := tensor.New(context.Background(), p, tensor.Uint8, 4096)
			require.NoError(t, err)
			dev.Panic(tc.methods...)
			require.NotPanics(t, func() { _, err = tensor.New(context.Background(), p, tensor.Uint8, 4096) })
			require.ErrorIs(t, err, tensor.ErrOutOfMemory)
			var oom *tensor.OOMError
			require.True(t, errors.As(err, &oom))
			assert.Equal(t, tc.panics, tr.Totals().PartPanics)
			for _, v := range []int64{oom.OtherReserved, oom.Reserved, oom.Active, oom.Cached} {
				assert.GreaterOrEqual(t, v, int64(0))
			}
			assert.GreaterOrEqual(t, oom.Outside, int64(-1))
			require.NoError(t, x.Free())
			runtime.KeepAlive(tc.part)
		})
	}
}
