package track

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/fpstack"
)

//go:noinline
func captureLeaf(t *testing.T, tr *Tracker) *Record {
	r := &Record{Bytes: 8, Meta: InternMeta("tensor", "host", "", nil)}
	require.NoError(t, tr.Books().Record(context.Background(), r, 0))
	return r
}

//go:noinline
func captureVia(t *testing.T, tr *Tracker, depth int) *Record {
	if depth == 0 {
		return captureLeaf(t, tr)
	}
	return captureVia(t, tr, depth-1)
}

// The frame-pointer walk is only a key: sites are those runtime.Callers
// gives, with the walk on or off, and repeated stacks are served from the
// cache without a mismatch or a fallback.
func TestFramePointerSitesMatchCallers(t *testing.T) {
	if !fpstack.Enabled() {
		t.Skip("frame-pointer capture is off on this platform or by TENSORLIFE_STACK")
	}
	walked, err := New(FramePointers(true))
	require.NoError(t, err)
	plain, err := New(FramePointers(false))
	require.NoError(t, err)
	for depth := range 40 { // past the 32 frames a site keeps
		for range 3 {
			var recs []*Record
			for _, tr := range []*Tracker{walked, plain} { // one call instruction for both
				recs = append(recs, captureVia(t, tr, depth))
			}
			assert.Equal(t, recs[1].Site().pcs, recs[0].Site().pcs, "depth %d", depth)
			require.NoError(t, (recs[0]).Release())
			require.NoError(t, (recs[1]).Release())
		}
	}
	tt := walked.Totals()
	assert.Zero(t, tt.StackFallbacks)
	assert.Zero(t, tt.StackMismatches)
	assert.Equal(t, plain.Totals().Sites, tt.Sites)
	assert.Positive(t, walked.walks.table.Len(), "walks are cached")
	assert.Zero(t, plain.walks.table.Len(), "FramePointers(false) never walks")
}

// A walk that does not agree with runtime.Callers is cached as untrusted and
// served by runtime.Callers: the site stays right.
func TestUntrustedWalkFallsBackToCallers(t *testing.T) {
	if !fpstack.Enabled() {
		t.Skip("frame-pointer capture is off")
	}
	tr, err := New()
	require.NoError(t, err)
	var sites []*Site
	for i := range 2 {
		if i == 1 {
			// Poison every cached walk, as a disagreement would leave it.
			poisoned := newWalkCache(tr.cfg.maxSites)
			for e := range tr.walks.table.All() {
				poisoned.insert(e.hash, e.pcs, nil)
			}
			tr.walks = poisoned
		}
		r := captureLeaf(t, tr)
		sites = append(sites, r.Site())
		require.NoError(t, r.Release())
	}
	assert.Same(t, sites[0], sites[1])
}

// A walk that misses a full cache is served by runtime.Callers without a
// comparison: the site is the same and nothing is cached or counted.
func TestFullWalkCacheServesCallers(t *testing.T) {
	if !fpstack.Enabled() {
		t.Skip("frame-pointer capture is off")
	}
	walked, err := New()
	require.NoError(t, err)
	plain, err := New(FramePointers(false))
	require.NoError(t, err)
	walked.walks = newWalkCache(0) // full, with no entry
	require.True(t, walked.walks.full())
	var recs []*Record
	for _, tr := range []*Tracker{walked, plain} { // one call instruction for both
		recs = append(recs, captureLeaf(t, tr))
	}
	assert.Equal(t, recs[1].Site().pcs, recs[0].Site().pcs)
	assert.Zero(t, walked.walks.table.Len(), "nothing cached")
	assert.Zero(t, walked.walks.table.Refused(), "a full cache is not asked to keep the walk")
	tt := walked.Totals()
	assert.Zero(t, tt.StackMismatches)
	assert.Zero(t, tt.StackFallbacks)
	require.NoError(t, (recs[0]).Release())
	require.NoError(t, (recs[1]).Release())
}
