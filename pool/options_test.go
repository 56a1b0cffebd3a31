package pool_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

func TestNewRejectsInvalidOptions(t *testing.T) {
	host, err := tensor.NewHostDevice(4 << 20)
	require.NoError(t, err)
	tr := newTracker(t)
	cases := []struct {
		name string
		opts []pool.Option
	}{
		{"nil option", []pool.Option{nil}},
		{"Budget(0)", []pool.Option{pool.Budget(0)}},
		{"Budget(-1)", []pool.Option{pool.Budget(-1)}},
		{"Budget above the device", []pool.Option{pool.Budget(4<<20 + 1)}},
		{"BudgetFraction(0)", []pool.Option{pool.BudgetFraction(0)}},
		{"BudgetFraction(-0.5)", []pool.Option{pool.BudgetFraction(-0.5)}},
		{"BudgetFraction(1.01)", []pool.Option{pool.BudgetFraction(1.01)}},
		{"BudgetFraction(NaN)", []pool.Option{pool.BudgetFraction(math.NaN())}},
		{"BudgetFraction(+Inf)", []pool.Option{pool.BudgetFraction(math.Inf(1))}},
		{"BudgetFraction of nothing", []pool.Option{pool.BudgetFraction(1e-9)}},
		{"Budget and BudgetFraction", []pool.Option{pool.Budget(1 << 20), pool.BudgetFraction(0.5)}},
		{"Tracker(nil)", []pool.Option{pool.Tracker(nil)}},
		{"Tracker and Untracked", []pool.Option{pool.Tracker(tr), pool.Untracked()}},
		{"MaxCachedBytes(-1)", []pool.Option{pool.MaxCachedBytes(-1)}},
		{"TopSites(-1)", []pool.Option{pool.TopSites(-1)}},
		{"TopSites(101)", []pool.Option{pool.TopSites(101)}},
		{"OnOutOfMemory(nil)", []pool.Option{pool.OnOutOfMemory(nil)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pool.New(host, tc.opts...)
			assert.ErrorIs(t, err, pool.ErrInvalidOption)
			assert.Nil(t, p)
		})
	}

	t.Run("nil tracker", func(t *testing.T) {
		_, err := pool.New(host, pool.Tracker(nil))
		assert.ErrorIs(t, err, track.ErrNilTracker, "the one nil-tracker error")
	})
	t.Run("nil device", func(t *testing.T) {
		p, err := pool.New(nil)
		assert.ErrorIs(t, err, tensor.ErrNilAllocator)
		assert.Nil(t, p)
	})
	t.Run("budget without MemInfo", func(t *testing.T) {
		dev := noMemInfoDevice{host}
		_, err := pool.New(dev, pool.Budget(1<<20))
		assert.ErrorIs(t, err, pool.ErrInvalidOption)
		assert.ErrorIs(t, err, errNoMemInfo)
		// Without a budget the total is not needed.
		p, err := pool.New(dev)
		require.NoError(t, err)
		assert.NoError(t, p.Close())
	})
}

func TestNewOptions(t *testing.T) {
	host, err := tensor.NewHostDevice(4 << 20)
	require.NoError(t, err)
	tr := newTracker(t)
	cases := []struct {
		name        string
		opts        []pool.Option
		budget      int64
		maxCached   int64
		wantTracker *track.Tracker
	}{
		{"defaults", nil, 0, -1, track.Default()},
		{"Budget", []pool.Option{pool.Budget(3 << 20)}, 3 << 20, -1, track.Default()},
		{"Budget of the whole device", []pool.Option{pool.Budget(4 << 20)}, 4 << 20, -1, track.Default()},
		{"BudgetFraction(0.5)", []pool.Option{pool.BudgetFraction(0.5)}, 2 << 20, -1, track.Default()},
		{"BudgetFraction(1)", []pool.Option{pool.BudgetFraction(1)}, 4 << 20, -1, track.Default()},
		{"MaxCachedBytes(0)", []pool.Option{pool.MaxCachedBytes(0)}, 0, 0, track.Default()},
		{"Tracker", []pool.Option{pool.Tracker(tr), pool.TopSites(0)}, 0, -1, tr},
		{"Untracked", []pool.Option{pool.Untracked(), pool.TopSites(100)}, 0, -1, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pool.New(host, tc.opts...)
			require.NoError(t, err)
			assert.Equal(t, tc.budget, p.Budget())
			s := p.Stats()
			assert.Equal(t, tc.budget, s.Limit)
			assert.Equal(t, tc.maxCached, s.MaxCached)
			assert.Same(t, tc.wantTracker, p.Tracker())
			assert.Same(t, tensor.Device(host), p.Device())
			assert.NoError(t, p.Close())
		})
	}
}
