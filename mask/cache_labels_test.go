package mask

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// liveUnder returns the live tensors a snapshot filtered by one label
// holds: what -tagfocus key=value shows.
func liveUnder(t *testing.T, tr *track.Tracker, key, value string) int64 {
	t.Helper()
	snap, err := tr.SnapshotOf(track.Filter{Labels: map[string]string{key: value}})
	require.NoError(t, err)
	var n int64
	for _, g := range snap.Groups {
		n += g.Count
	}
	return n
}

func TestCachedMaskCarriesTheCachesLabels(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t, CacheName("prompts"))
	r1 := track.WithLabels(context.Background(), "request", "r1")
	m, err := c.GetOrBuild(r1, "system", func(ctx context.Context) (*tensor.Tensor, error) {
		return b.Causal(ctx, 8)
	})
	require.NoError(t, err)
	assert.Equal(t, "{cache=prompts}", m.Labels().String(), "every handle of the mask is the cache's")
	free(t, m) // r1 ends

	assert.Zero(t, liveUnder(t, e.tr, "request", "r1"), "r1 holds nothing after it ended")
	assert.Equal(t, int64(1), liveUnder(t, e.tr, "cache", "prompts"))

	// The profile a person filters with -tagfocus request=r1 agrees.
	p, err := pprofexport.Profile(e.tr.Snapshot())
	require.NoError(t, err)
	var cached int
	for _, s := range p.Sample {
		assert.NotContains(t, s.Label["request"], "r1", "a sample under request=r1")
		if len(s.Label["cache"]) > 0 && s.Value[3] > 0 {
			cached++
		}
	}
	assert.Equal(t, 1, cached, "the cached mask is listed under cache=prompts")

	// A mask the cache refuses stays the request's.
	none := newCache(t, MaxEntries(0))
	r2 := track.WithLabels(context.Background(), "request", "r2")
	x, err := b.Causal(r2, 4)
	require.NoError(t, err)
	require.NoError(t, none.Put("k", x))
	assert.Equal(t, int64(1), liveUnder(t, e.tr, "request", "r2"))
	free(t, x)
	require.NoError(t, c.Purge())
}

// A mask only the cache keeps is held by a "mask cache entry", not by an
// anonymous Retain that looks forgotten.
func TestCachedMaskIsHeldByTheCacheEntry(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t, CacheName("prompts"))
	m, err := c.GetOrBuild(context.Background(), "system", func(ctx context.Context) (*tensor.Tensor, error) {
		return b.Causal(ctx, 8)
	})
	require.NoError(t, err)
	free(t, m) // the request's handles are gone; the cache's stays

	snap := e.tr.Snapshot()
	require.Len(t, snap.Allocations, 1)
	var hows []string
	for _, h := range snap.Allocations[0].Holders {
		if h.Live > 0 {
			hows = append(hows, h.How)
		}
	}
	assert.Equal(t, []string{CacheOwner}, hows)
	require.Len(t, snap.Groups, 1)
	require.NotNil(t, snap.Groups[0].HeldBy)
	assert.Contains(t, snap.Groups[0].HeldBy.String(), "a mask cache entry made at cache_labels_test.go:")
}
