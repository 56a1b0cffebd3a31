package mask

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
	"github.com/tensorlife/tensorlife/track/watch"
)

func newCache(t *testing.T, opts ...CacheOption) *Cache {
	t.Helper()
	c, err := NewCache(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c
}

// putPadding caches a [1, n] padding mask under key and frees the
// caller's handle, leaving the cache the only owner.
func putPadding(t *testing.T, c *Cache, b *Builder, key string, n int) {
	t.Helper()
	m, err := b.Padding(context.Background(), []int{n / 2}, n)
	require.NoError(t, err)
	require.NoError(t, c.Put(key, m))
	free(t, m)
}

func TestCacheHitsHandOutOwnHandles(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t, CacheName("prompts"))
	putPadding(t, c, b, "p", 8)

	h1, ok := c.Get("p")
	require.True(t, ok)
	h2, ok := c.Get("p")
	require.True(t, ok)
	assert.NotSame(t, h1, h2)
	assert.Equal(t, h1.ID(), h2.ID(), "handles on one mask")
	assert.Equal(t, refPadding(tensor.Bool, []int{4}, 8), readBytes(t, h1))
	free(t, h1)
	assert.Equal(t, refPadding(tensor.Bool, []int{4}, 8), readBytes(t, h2), "freeing one handle leaves the others")
	free(t, h2)

	_, ok = c.Get("absent")
	assert.False(t, ok)
	var src interface{ Stats() CacheStats } = c // what summaries and metrics read
	assert.Equal(t, CacheStats{Name: "prompts", Bytes: entryCost("p", 8), Entries: 1, MaxBytes: DefaultCacheBytes,
		MaxEntries: DefaultCacheEntries, Hits: 2, Misses: 1}, src.Stats())
	assert.Equal(t, int64(1), e.tr.Totals().LiveCount, "only the cache's handle remains")
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	entry := entryCost("a", 100) // each entry: a 100-byte mask under a one-byte key
	tests := []struct {
		name        string
		opts        []CacheOption
		wantEntries int64
	}{
		{"by bytes", []CacheOption{MaxBytes(3 * entry)}, 3},
		{"by entries", []CacheOption{MaxEntries(3)}, 3},
		{"by both", []CacheOption{MaxBytes(2*entry + entry/2), MaxEntries(3)}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			b := e.builder(t)
			c := newCache(t, tc.opts...)
			for _, k := range []string{"a", "b", "c"} {
				putPadding(t, c, b, k, 100)
			}
			h, ok := c.Get("b") // b becomes the most recent
			require.True(t, ok)
			free(t, h)
			putPadding(t, c, b, "d", 100)

			s := c.Stats()
			assert.Equal(t, tc.wantEntries, s.Entries)
			assert.Equal(t, entry*tc.wantEntries, s.Bytes)
			assert.Equal(t, int64(e.tr.Totals().LiveCount), s.Entries, "evicted masks were freed")
			var kept []string
			for _, k := range []string{"a", "b", "c", "d"} {
				if h, ok := c.Get(k); ok {
					kept = append(kept, k)
					free(t, h)
				}
			}
			if tc.wantEntries == 3 {
				assert.Equal(t, []string{"b", "c", "d"}, kept)
				assert.Equal(t, int64(1), s.Evictions)
			} else {
				// Two fit: c pushed a out, then d pushed c (b was used).
				assert.Equal(t, []string{"b", "d"}, kept)
				assert.Equal(t, int64(2), s.Evictions)
			}
		})
	}
}

func TestCacheEvictedMaskSurvivesItsUser(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t, MaxEntries(1))
	putPadding(t, c, b, "old", 6)
	inUse, ok := c.Get("old")
	require.True(t, ok)

	putPadding(t, c, b, "new", 6) // evicts "old" while a request holds it
	_, ok = c.Get("old")
	assert.False(t, ok)
	assert.Equal(t, int64(1), c.Stats().Evictions)
	assert.False(t, inUse.Freed())
	assert.Equal(t, refPadding(tensor.Bool, []int{3}, 6), readBytes(t, inUse), "the request's mask is intact")
	assert.Equal(t, int64(2), e.dev.live(), "the evicted mask's memory stays until its user frees it")

	free(t, inUse)
	assert.Equal(t, int64(1), e.dev.live())
}

func TestCacheNotCached(t *testing.T) {
	tests := []struct {
		name string
		opts []CacheOption
	}{
		{"zero budget", []CacheOption{MaxBytes(0)}},
		{"zero entries", []CacheOption{MaxEntries(0)}},
		{"larger than the budget", []CacheOption{MaxBytes(10)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			b := e.builder(t)
			c := newCache(t, tc.opts...)
			builds := 0
			for range 3 {
				m, err := c.GetOrBuild(context.Background(), "causal/16", func(ctx context.Context) (*tensor.Tensor, error) {
					builds++
					return b.Causal(ctx, 16)
				})
				require.NoError(t, err)
				assert.Equal(t, refCausal(tensor.Bool, 16), readBytes(t, m), "the caller still gets a correct mask")
				free(t, m)
			}
			assert.Equal(t, 3, builds)
			s := c.Stats()
			assert.Equal(t, int64(3), s.Rejected)
			assert.Equal(t, int64(3), s.Misses)
			assert.Zero(t, s.Entries)
			assert.Zero(t, s.Bytes)
			assert.Zero(t, e.tr.Totals().LiveCount)
		})
	}
}

// A cached view keeps its whole parent alive: the budget counts that.
func TestCacheCountsWhatAViewHolds(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t, MaxBytes(1<<10))
	g, err := b.NewGrowable(context.Background(), 1, 1<<16)
	require.NoError(t, err)
	require.NoError(t, g.Append(1))
	v, err := g.View()
	require.NoError(t, err)
	require.Less(t, v.Bytes(), int64(1<<10), "the view shows a few bytes")
	require.NoError(t, c.Put("view", v))
	assert.Zero(t, c.Stats().Entries, "but holds 64 KiB: over the budget, not cached")
	assert.EqualValues(t, 1, c.Stats().Rejected)
	free(t, v)
	require.NoError(t, g.Free())
}

// A Put the budget refuses still replaces: Get must not serve the mask the
// caller has replaced.
func TestCacheRejectedPutDropsTheOldMask(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t, MaxBytes(1<<10))
	putPadding(t, c, b, "k", 8)
	require.EqualValues(t, 1, c.Stats().Entries)

	big, err := b.Padding(context.Background(), []int{1 << 11}, 1<<11)
	require.NoError(t, err)
	require.NoError(t, c.Put("k", big))
	_, ok := c.Get("k")
	assert.False(t, ok, "the old mask under k is gone")
	s := c.Stats()
	assert.Zero(t, s.Entries)
	assert.Zero(t, s.Bytes)
	assert.EqualValues(t, 1, s.Rejected)
	free(t, big)
}

// A nil Cache misses on reads and refuses writes with an error.
func TestNilCache(t *testing.T) {
	var c *Cache
	_, ok := c.Get("k")
	assert.False(t, ok)
	assert.Equal(t, CacheStats{}, c.Stats())
	assert.ErrorIs(t, c.Put("k", nil), ErrNilCache)
	_, err := c.GetOrBuild(context.Background(), "k", func(context.Context) (*tensor.Tensor, error) { return nil, nil })
	assert.ErrorIs(t, err, ErrNilCache)
	assert.NoError(t, c.Purge())
	assert.NoError(t, c.Close())
	assert.True(t, c.Closed())
}

// A zero byte budget caches nothing, empty masks included.
func TestCacheZeroBudgetCachesEmptyMasks(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t, MaxBytes(0))
	m, err := b.Padding(context.Background(), []int{0}, 0)
	require.NoError(t, err)
	require.NoError(t, c.Put("empty", m))
	assert.Zero(t, c.Stats().Entries)
	free(t, m)
}

func TestCacheGetOrBuild(t *testing.T) {
	e := newEnv(t)
	e.checks = append(e.checks, tracktest.AllowMisuse()) // a build returns a freed mask on purpose
	b := e.builder(t)
	c := newCache(t)
	ctx := context.Background()
	builds := 0
	build := func(ctx context.Context) (*tensor.Tensor, error) {
		builds++
		return b.CausalPadding(ctx, []int{3, 5}, 5)
	}
	for range 4 {
		m, err := c.GetOrBuild(ctx, "k", build)
		require.NoError(t, err)
		assert.Equal(t, refCausalPadding(tensor.Bool, []int{3, 5}, 5), readBytes(t, m))
		free(t, m)
	}
	assert.Equal(t, 1, builds)
	assert.Equal(t, int64(3), c.Stats().Hits)

	errBuild := errors.New("no prompt")
	tests := []struct {
		name  string
		key   string
		build func(context.Context) (*tensor.Tensor, error)
		want  error
	}{
		{"build fails", "x", func(context.Context) (*tensor.Tensor, error) { return nil, errBuild }, errBuild},
		{"build returns nil", "y", func(context.Context) (*tensor.Tensor, error) { return nil, nil }, ErrNilMask},
		{"nil build", "z", nil, ErrInvalidOption},
		{"build returns a freed mask", "w", func(ctx context.Context) (*tensor.Tensor, error) {
			m, err := b.Causal(ctx, 2)
			if err != nil {
				return nil, err
			}
			return m, m.Free()
		}, tensor.ErrFreed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := c.GetOrBuild(ctx, tc.key, tc.build)
			assert.ErrorIs(t, err, tc.want)
			assert.Nil(t, m)
			_, ok := c.Get(tc.key)
			assert.False(t, ok, "nothing cached")
		})
	}
}

func TestCachePut(t *testing.T) {
	e := newEnv(t)
	e.checks = append(e.checks, tracktest.AllowMisuse()) // puts a freed mask on purpose
	b := e.builder(t)
	c := newCache(t)

	assert.ErrorIs(t, c.Put("nil", nil), ErrNilMask)
	m, err := b.Causal(context.Background(), 2)
	require.NoError(t, err)
	free(t, m)
	assert.ErrorIs(t, c.Put("freed", m), tensor.ErrFreed)

	putPadding(t, c, b, "k", 4)
	putPadding(t, c, b, "k", 10) // replaces: not an eviction
	s := c.Stats()
	assert.Equal(t, int64(1), s.Entries)
	assert.Equal(t, entryCost("k", 10), s.Bytes)
	assert.Zero(t, s.Evictions)
	assert.Equal(t, int64(1), e.tr.Totals().LiveCount, "the replaced mask was freed")
}

func TestCachePurgeAndClose(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c, err := NewCache()
	require.NoError(t, err)
	putPadding(t, c, b, "a", 4)
	held, ok := c.Get("a")
	require.True(t, ok)

	require.NoError(t, c.Purge())
	assert.Zero(t, c.Stats().Entries)
	assert.Equal(t, refPadding(tensor.Bool, []int{2}, 4), readBytes(t, held), "purge leaves held masks valid")
	putPadding(t, c, b, "b", 4)
	assert.Equal(t, int64(1), c.Stats().Entries, "a purged cache stays usable")

	require.NoError(t, c.Close())
	assert.True(t, c.Closed())
	assert.Zero(t, c.Stats().Bytes)
	_, ok = c.Get("b")
	assert.False(t, ok)
	assert.ErrorIs(t, c.Put("c", held), ErrCacheClosed)
	_, err = c.GetOrBuild(context.Background(), "c", func(ctx context.Context) (*tensor.Tensor, error) {
		return b.Causal(ctx, 1)
	})
	assert.ErrorIs(t, err, ErrCacheClosed)
	require.NoError(t, c.Close(), "closing twice is harmless")
	free(t, held)
}

func TestCacheConcurrentBudget(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	const budget = 600
	c := newCache(t, MaxBytes(budget), MaxEntries(8))

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var checker sync.WaitGroup
	checker.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := c.Stats()
			assert.LessOrEqual(t, s.Bytes, int64(budget))
			assert.LessOrEqual(t, s.Entries, int64(8))
		}
	})
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				n := 1 + (w*7+i*13)%24 // 24 keys, masks of n*n bytes up to 576
				key := fmt.Sprintf("causal/%d", n)
				m, err := c.GetOrBuild(context.Background(), key, func(ctx context.Context) (*tensor.Tensor, error) {
					return b.Causal(ctx, n)
				})
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, refCausal(tensor.Bool, n), readBytes(t, m), key)
				assert.NoError(t, m.Free())
			}
		})
	}
	wg.Wait()
	close(stop)
	checker.Wait()

	s := c.Stats()
	assert.Equal(t, int64(8*200), s.Hits+s.Misses)
	assert.Positive(t, s.Evictions)
	assert.Equal(t, s.Entries, e.tr.Totals().LiveCount, "only cached masks are live")
}

// A cache that fills and stays full keeps masks past the requests that
// built them on purpose: it hands them to its bounded owner, so a watcher
// judges none of them.
func TestCacheFullIsNoLeakSuspect(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t, CacheName("prompts"), MaxEntries(8))
	w, err := watch.New(e.tr, watch.OnSuspect(func(s watch.Suspect) { t.Errorf("suspect: %v", s.Site) }))
	require.NoError(t, err)
	for request := range 300 {
		ctx, end := track.WithRequest(context.Background())
		key := fmt.Sprintf("prompt-%d", request%20)
		if m, ok := c.Get(key); ok {
			free(t, m)
		} else {
			m, err := b.Padding(ctx, []int{request%20 + 1}, 32)
			require.NoError(t, err)
			require.NoError(t, c.Put(key, m))
			free(t, m)
		}
		end()
		require.NoError(t, w.Tick())
	}
	assert.Equal(t, int64(8), c.Stats().Entries, "the cache is full")
	snap, err := e.tr.SnapshotOf(track.Filter{Outlived: true})
	require.NoError(t, err)
	assert.Zero(t, snap.Sites[0].OutlivedBytes, "what the cache keeps has not outlived its request: it was handed over")
	assert.Empty(t, w.Suspects())
}
