package pool_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

// The budget is checked before the device is asked: a refused request never
// reaches it, whatever the device has free.
func TestBudgetRefusesBeforeTheDevice(t *testing.T) {
	dev := newFault(t, 4<<20)
	p := newPool(t, dev, pool.Budget(1<<20))

	a, err := p.Allocate(768 << 10)
	require.NoError(t, err)
	b, err := p.Allocate(256 << 10)
	require.NoError(t, err, "exactly the budget fits")
	asked := dev.Allocs()

	_, err = p.Allocate(1)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	var oom *tensor.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, "budget", oom.Reason)
	assert.Equal(t, int64(512), oom.Requested, "the request after rounding")
	assert.Equal(t, int64(1<<20), oom.Limit)
	assert.Equal(t, int64(1<<20), oom.Reserved)
	assert.Equal(t, int64(1<<20), oom.Active)
	assert.Zero(t, oom.Cached)
	assert.Equal(t, int64(3<<20), oom.DeviceFree)
	assert.NoError(t, oom.Err)
	assert.Equal(t, asked, dev.Allocs(), "the device was asked for memory past the budget")
	assert.Contains(t, err.Error(), "budget limit 1 MiB")

	s := requireBalanced(t, p, dev)
	assert.Equal(t, int64(1), s.OOMs)
	require.NoError(t, p.Release(a))
	require.NoError(t, p.Release(b))
	require.NoError(t, p.Close())
}

func TestBudgetFraction(t *testing.T) {
	dev := newFault(t, 4<<20)
	p := newPool(t, dev, pool.BudgetFraction(0.25))
	a, err := p.Allocate(1 << 20)
	require.NoError(t, err)
	_, err = p.Allocate(512)
	var oom *tensor.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, int64(1<<20), oom.Limit)
	require.NoError(t, p.Release(a))
	require.NoError(t, p.Close())
}

// When the budget or the device refuses, the cache goes back to the device
// and the request is tried once more.
func TestOutOfMemoryReleasesCacheAndRetries(t *testing.T) {
	cases := []struct {
		name     string
		capacity int64
		opts     []pool.Option
	}{
		{"budget", 4 << 20, []pool.Option{pool.Budget(1 << 20)}},
		{"device", 1 << 20, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dev := newFault(t, tc.capacity)
			p := newPool(t, dev, tc.opts...)
			for _, n := range []int64{256 << 10, 512 << 10} {
				b, err := p.Allocate(n)
				require.NoError(t, err)
				require.NoError(t, p.Release(b))
			}
			require.Equal(t, int64(768<<10), p.Stats().Cached)

			big, err := p.Allocate(768 << 10)
			require.NoError(t, err, "the cached blocks must make room")
			s := requireBalanced(t, p, dev)
			assert.Zero(t, s.Cached)
			assert.Equal(t, int64(2), s.Evictions)
			assert.Zero(t, s.OOMs)
			require.NoError(t, p.Release(big))
			require.NoError(t, p.Close())
		})
	}
}

func TestDeviceFailures(t *testing.T) {
	t.Run("a transient failure is retried", func(t *testing.T) {
		dev := newFault(t, 1<<20, tensortest.FailNth(1))
		p := newPool(t, dev)
		b, err := p.Allocate(4096)
		require.NoError(t, err)
		assert.Equal(t, int64(2), dev.Allocs())
		require.NoError(t, p.Release(b))
		requireBalanced(t, p, dev)
		require.NoError(t, p.Close())
	})
	t.Run("a failed retry is an OOMError wrapping the device error", func(t *testing.T) {
		dev := newFault(t, 1<<20, tensortest.FailNth(1), tensortest.FailNth(2))
		p := newPool(t, dev)
		_, err := p.Allocate(4096)
		require.ErrorIs(t, err, tensor.ErrOutOfMemory)
		assert.ErrorIs(t, err, tensortest.ErrInjected)
		var oom *tensor.OOMError
		require.ErrorAs(t, err, &oom)
		assert.Equal(t, "device", oom.Reason)
		assert.Equal(t, int64(1<<20), oom.Limit, "the device's total")
		var de *tensor.DeviceError
		assert.True(t, errors.As(err, &de))
		s := requireBalanced(t, p, dev)
		assert.Equal(t, int64(1), s.OOMs)
		assert.Zero(t, s.Reserved)
		require.NoError(t, p.Close())
	})
	t.Run("other device errors are passed on without retry", func(t *testing.T) {
		dev := newFault(t, 1<<20, tensortest.FailNth(1), tensortest.WithoutOOM())
		p := newPool(t, dev)
		_, err := p.Allocate(4096)
		require.ErrorIs(t, err, tensortest.ErrInjected)
		assert.NotErrorIs(t, err, tensor.ErrOutOfMemory)
		assert.Equal(t, int64(1), dev.Allocs())
		s := requireBalanced(t, p, dev)
		assert.Zero(t, s.OOMs)
		require.NoError(t, p.Close())
	})
}

// Emptying the cache cannot make room for these requests, so the cache is
// kept and the request fails at once.
func TestOutOfMemoryKeepsCacheWhenItCannotHelp(t *testing.T) {
	cases := []struct {
		name     string
		capacity int64
		opts     []pool.Option
		active   int64
		request  int64
		reason   string
	}{
		{"budget refuses even with nothing cached", 4 << 20, []pool.Option{pool.Budget(1 << 20)}, 768 << 10, 512 << 10, "budget"},
		{"larger than the budget", 4 << 20, []pool.Option{pool.Budget(1 << 20)}, 0, 2 << 20, "budget"},
		{"larger than the device", 1 << 20, nil, 0, 2 << 20, "device"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dev := newFault(t, tc.capacity)
			p := newPool(t, dev, tc.opts...)
			var held tensor.Block
			if tc.active > 0 {
				var err error
				held, err = p.Allocate(tc.active)
				require.NoError(t, err)
			}
			cached, err := p.Allocate(200 << 10)
			require.NoError(t, err)
			require.NoError(t, p.Release(cached))

			_, err = p.Allocate(tc.request)
			var oom *tensor.OOMError
			require.ErrorAs(t, err, &oom)
			assert.Equal(t, tc.reason, oom.Reason)
			s := requireBalanced(t, p, dev)
			assert.Equal(t, cached.Size, s.Cached, "the cache was emptied for nothing")
			assert.Zero(t, s.Evictions)
			assert.Equal(t, int64(1), s.OOMs)
			if tc.active > 0 {
				require.NoError(t, p.Release(held))
			}
			require.NoError(t, p.Close())
		})
	}
}
