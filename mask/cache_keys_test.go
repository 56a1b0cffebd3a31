package mask

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
)

// The budget counts keys: many entries under long keys stay within it
// (512 MiB of keys once fitted under a 64 KiB budget).
func TestCacheBudgetCountsKeys(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	const budget = 64 << 10
	c := newCache(t, MaxBytes(budget))
	m, err := b.Causal(context.Background(), 2) // 4 bytes
	require.NoError(t, err)
	var keyBytes int64
	for i := range 1000 {
		key := fmt.Sprintf("%04d", i) + strings.Repeat("k", MaxKeyBytes-4)
		require.NoError(t, c.Put(key, m))
		s := c.Stats()
		require.LessOrEqual(t, s.Bytes, int64(budget))
		keyBytes = s.Entries * MaxKeyBytes
		require.LessOrEqual(t, keyBytes, int64(budget), "the keys kept fit the budget")
	}
	s := c.Stats()
	assert.Equal(t, int64(budget/entryCost(strings.Repeat("k", MaxKeyBytes), 4)), s.Entries)
	assert.Equal(t, s.Entries*entryCost(strings.Repeat("k", MaxKeyBytes), 4), s.Bytes)
	assert.Positive(t, s.Evictions)
	free(t, m)

	// A mask that fits the budget alone but not with its key and entry is
	// not cached.
	small := newCache(t, MaxBytes(entryCost("k", 4)-1))
	m, err = b.Causal(context.Background(), 2)
	require.NoError(t, err)
	require.NoError(t, small.Put("k", m))
	assert.Zero(t, small.Stats().Entries)
	assert.Equal(t, int64(1), small.Stats().Rejected)
	free(t, m)
}

// A key longer than MaxKeyBytes is refused with ErrKeyTooLong: nothing is
// cached or built, the error does not echo the key, and Get misses.
func TestCacheRefusesLongKeys(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t)
	m, err := b.Causal(context.Background(), 4)
	require.NoError(t, err)

	longest := strings.Repeat("k", MaxKeyBytes)
	require.NoError(t, c.Put(longest, m), "a key of MaxKeyBytes is fine")
	h, ok := c.Get(longest)
	require.True(t, ok)
	free(t, h)

	for _, key := range []string{longest + "k", strings.Repeat("é", 1<<19)} {
		err := c.Put(key, m)
		require.ErrorIs(t, err, ErrKeyTooLong)
		assert.Less(t, len(err.Error()), 200, "the error does not echo a %d-byte key", len(key))
		assert.Contains(t, err.Error(), fmt.Sprintf("a key of %d bytes", len(key)))
		built := false
		_, err = c.GetOrBuild(context.Background(), key, func(ctx context.Context) (*tensor.Tensor, error) {
			built = true
			return b.Causal(ctx, 4)
		})
		require.ErrorIs(t, err, ErrKeyTooLong)
		assert.False(t, built, "nothing is built for a key that cannot be cached")
		_, ok := c.Get(key)
		assert.False(t, ok)
	}
	s := c.Stats()
	assert.Equal(t, int64(1), s.Entries)
	assert.Zero(t, s.Rejected, "a refused key is an error, not a rejected mask")
	free(t, m)
	assert.Equal(t, int64(1), e.tr.Totals().LiveCount, "only the cached mask is live")

	// Errors of other kinds quote a long key cut short too.
	var nilCache *Cache
	err = nilCache.Put(strings.Repeat("x", MaxKeyBytes), m)
	require.ErrorIs(t, err, ErrNilCache)
	assert.Less(t, len(err.Error()), 200)
}

// CacheEntryOverhead covers the Go heap an entry takes: its map slot, its
// list element and the cache's own handle (measured here), with room for
// the runtime's finalizer record of the handle.
func TestCacheEntryOverheadCoversTheHeap(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	const n = 4096
	c := newCache(t, MaxEntries(n), MaxBytes(1<<40))
	m, err := b.Causal(context.Background(), 2)
	require.NoError(t, err)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%05d", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, k := range keys {
		require.NoError(t, c.Put(k, m))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perEntry := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f B of Go heap per entry, against CacheEntryOverhead %d", perEntry, CacheEntryOverhead)
	assert.Less(t, perEntry, float64(CacheEntryOverhead))
	require.Equal(t, int64(n), c.Stats().Entries)
	free(t, m)
}
