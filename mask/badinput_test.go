package mask_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// Every entry point of the package doc's list of errors, fed each bad
// input it names, returns an error matching the sentinel it names.
func TestEveryEntryPointRefusesBadInputWithItsTypedError(t *testing.T) {
	ctx := context.Background()
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(host, nil)
	require.NoError(t, err)
	b, err := mask.NewBuilder(alloc, mask.MaxLength(64))
	require.NoError(t, err)
	c, err := mask.NewCache()
	require.NoError(t, err)
	closed, err := mask.NewCache()
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	m, err := b.Causal(ctx, 4)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Free()) }()
	long := strings.Repeat("k", mask.MaxKeyBytes+1)
	var nilCache *mask.Cache
	build := func(context.Context) (*tensor.Tensor, error) { return nil, nil }

	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"NewBuilder nil allocator", func() error { _, err := mask.NewBuilder(nil); return err }, tensor.ErrNilAllocator},
		{"NewBuilder nil option", func() error { _, err := mask.NewBuilder(alloc, nil); return err }, mask.ErrInvalidOption},
		{"NewBuilder bad dtype", func() error { _, err := mask.NewBuilder(alloc, mask.DType(tensor.Int32)); return err }, mask.ErrInvalidOption},
		{"NewBuilder negative MaxLength", func() error { _, err := mask.NewBuilder(alloc, mask.MaxLength(-1)); return err }, mask.ErrInvalidOption},
		{"Causal negative length", func() error { _, err := b.Causal(ctx, -1); return err }, mask.ErrInvalidLength},
		{"Padding empty batch", func() error { _, err := b.Padding(ctx, nil, 4); return err }, mask.ErrEmptyBatch},
		{"Padding length past the sequence", func() error { _, err := b.Padding(ctx, []int{5}, 4); return err }, mask.ErrInvalidLength},
		{"CausalPadding negative length", func() error { _, err := b.CausalPadding(ctx, []int{-1}, 4); return err }, mask.ErrInvalidLength},
		{"PaddingFromTokens empty batch", func() error { _, err := b.PaddingFromTokens(ctx, nil, 0); return err }, mask.ErrEmptyBatch},
		{"PaddingFromTokens ragged rows", func() error {
			_, err := b.PaddingFromTokens(ctx, [][]int32{{1, 2}, {1}}, 0)
			return err
		}, mask.ErrShapeMismatch},
		{"NewGrowable empty batch", func() error { _, err := b.NewGrowable(ctx, 0, 4); return err }, mask.ErrEmptyBatch},
		{"NewGrowable zero capacity", func() error { _, err := b.NewGrowable(ctx, 1, 0); return err }, mask.ErrInvalidLength},
		{"Append past MaxLength", func() error {
			g, err := b.NewGrowable(ctx, 1, 64)
			if err != nil {
				return err
			}
			defer func() { _ = g.Free() }()
			return g.Append(65)
		}, mask.ErrCapacity},
		{"Append negative", func() error {
			g, err := b.NewGrowable(ctx, 1, 4)
			if err != nil {
				return err
			}
			defer func() { _ = g.Free() }()
			return g.Append(-1)
		}, mask.ErrInvalidLength},
		{"AppendValid wrong batch", func() error {
			g, err := b.NewGrowable(ctx, 2, 4)
			if err != nil {
				return err
			}
			defer func() { _ = g.Free() }()
			return g.AppendValid([]bool{true})
		}, mask.ErrShapeMismatch},
		{"NewCache nil option", func() error { _, err := mask.NewCache(nil); return err }, mask.ErrInvalidOption},
		{"NewCache negative MaxBytes", func() error { _, err := mask.NewCache(mask.MaxBytes(-1)); return err }, mask.ErrInvalidOption},
		{"NewCache negative MaxEntries", func() error { _, err := mask.NewCache(mask.MaxEntries(-1)); return err }, mask.ErrInvalidOption},
		{"NewCache nil tracker", func() error { _, err := mask.NewCache(mask.CacheTracker(nil)); return err }, track.ErrNilTracker},
		{"Put key too long", func() error { return c.Put(long, m) }, mask.ErrKeyTooLong},
		{"Put nil mask", func() error { return c.Put("k", nil) }, mask.ErrNilMask},
		{"Put nil cache", func() error { return nilCache.Put("k", m) }, mask.ErrNilCache},
		{"Put closed cache", func() error { return closed.Put("k", m) }, mask.ErrCacheClosed},
		{"GetOrBuild key too long", func() error { _, err := c.GetOrBuild(ctx, long, build); return err }, mask.ErrKeyTooLong},
		{"GetOrBuild nil build", func() error { _, err := c.GetOrBuild(ctx, "k", nil); return err }, mask.ErrInvalidOption},
		{"GetOrBuild nil result", func() error { _, err := c.GetOrBuild(ctx, "k", build); return err }, mask.ErrNilMask},
		{"GetOrBuild nil cache", func() error { _, err := nilCache.GetOrBuild(ctx, "k", build); return err }, mask.ErrNilCache},
		{"GetOrBuild closed cache", func() error { _, err := closed.GetOrBuild(ctx, "k", build); return err }, mask.ErrCacheClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), tc.want)
		})
	}
}
