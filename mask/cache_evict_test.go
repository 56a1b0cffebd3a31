package mask

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// TestCacheOwnerIsWhatTheCacheHoldsUnderEviction is the example server's
// prompt cache in small: 12 goroutines GetOrBuild and Free masks of 64
// prompt lengths through a cache whose byte bound makes it evict all the
// time, while another goroutine reads the cache's owner. The owner never
// holds more than the cache's bound (it gives back what the cache evicts
// in the same step), so a watcher ticking meanwhile finds no owner over
// its bound and no leak suspect.
func TestCacheOwnerIsWhatTheCacheHoldsUnderEviction(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	const bound = 256 << 10
	c := newCache(t, MaxBytes(bound), CacheName("prompt-masks"))
	var suspects atomic.Int64
	w, err := watch.New(e.tr, watch.OnSuspect(func(watch.Suspect) { suspects.Add(1) }))
	require.NoError(t, err)

	stop := make(chan struct{})
	var worst, reads atomic.Int64
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			for _, o := range e.tr.Owners() {
				if o.Name == "prompt-masks" && o.Bytes > worst.Load() {
					worst.Store(o.Bytes)
				}
			}
			reads.Add(1)
			require.NoError(t, w.Tick())
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	var workers sync.WaitGroup
	for g := range 12 {
		workers.Go(func() {
			for i := range 300 {
				n := 1 + (g*131+i*37)%64 // 64 prompt lengths
				ctx, end := track.WithRequest(context.Background())
				m, err := c.GetOrBuild(ctx, "prompt:"+strconv.Itoa(n), func(ctx context.Context) (*tensor.Tensor, error) {
					lengths := make([]int, 16) // a batch of 16 prompts of n*64 tokens: up to 64 KiB
					for j := range lengths {
						lengths[j] = n * 64
					}
					return b.Padding(ctx, lengths, n*64)
				})
				if !assert.NoError(t, err) {
					end()
					return
				}
				assert.NoError(t, m.Free())
				end()
			}
		})
	}
	workers.Wait()
	close(stop)
	readers.Wait()
	st := c.Stats()
	require.NotZero(t, st.Evictions, "the cache evicted: the case that broke the owner's books")
	require.NotZero(t, reads.Load())
	assert.LessOrEqual(t, worst.Load(), int64(bound), "the owner never held more than the cache's bound")
	require.NoError(t, w.Tick())
	assert.Zero(t, suspects.Load(), "no owner over its bound, no leak suspect")
	require.NoError(t, c.Close())
}

// forgetful is a request's use of the cache that returns early and never
// frees the handle GetOrBuild gave it.
//
//go:noinline
func forgetful(t *testing.T, c *Cache, b *Builder, ctx context.Context, key string, n int) *tensor.Tensor {
	m, err := c.GetOrBuild(ctx, key, func(ctx context.Context) (*tensor.Tensor, error) {
		return b.Padding(ctx, []int{n}, n)
	})
	require.NoError(t, err)
	return m // the caller drops it on an early return
}

// TestForgottenCacheHandleIsNamedAtItsRequestsEnd: a request that keeps
// the handle GetOrBuild gave it on a miss (it built the mask, which the
// cache now keeps) leaks that mask as a hit's handle would, and the
// watcher names it at the first window after the request ended, while the
// cache still keeps the mask: no eviction, no growth waited for.
func TestForgottenCacheHandleIsNamedAtItsRequestsEnd(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t, MaxEntries(8))
	var named []watch.Suspect
	w, err := watch.New(e.tr, watch.OnSuspect(func(s watch.Suspect) { named = append(named, s) }))
	require.NoError(t, err)
	var kept []*tensor.Tensor
	for i := 1; i <= 20; i++ {
		ctx, end := track.WithRequest(context.Background())
		n := 64 + i // a new prompt length each request: misses
		kept = append(kept, forgetful(t, c, b, ctx, "prompt:"+strconv.Itoa(n), n))
		end()
		require.NoError(t, w.Tick())
		if i == 1 {
			require.Len(t, named, 1, "named at the first window after the first request")
			assert.Zero(t, c.Stats().Evictions, "before any eviction")
			assert.Equal(t, int64(1), c.Stats().Entries, "while the cache keeps the mask")
		}
	}
	require.NotEmpty(t, named)
	assert.True(t, named[0].IsHandle())
	assert.Contains(t, named[0].Site.Location().Function, "forgetful")
	assert.NotZero(t, c.Stats().Evictions, "later misses evicted the first masks, which the handles still keep")
	for _, m := range kept {
		require.NoError(t, m.Free())
	}
	require.NoError(t, c.Close())
}
