package track_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// groupsOf renders groups without their Oldest, which a snapshot read from
// counters does not know, in order.
func groupsOf(gs []track.Group) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		held := ""
		if g.HeldBy != nil {
			held = g.HeldBy.String()
		}
		out[i] = fmt.Sprintf("%v %s %s %s %v n=%d b=%d leaked=%d held=%q other=%v", g.Site, g.Kind, g.Device, g.DType,
			g.Shape, g.Count, g.Bytes, g.Leaked, held, g.OtherShapes)
	}
	return out
}

//go:noinline
func manyShapes(tr *track.Tracker, n int) []*track.Record {
	var out []*track.Record
	for i := range n {
		r := &track.Record{Bytes: int64(i + 1), Meta: track.InternMeta("mask", "host", "bool", []int{1, i + 1})}
		if err := tr.Books().Record(context.Background(), r, 0); err != nil {
			panic(err)
		}
		out = append(out, r)
	}
	return out
}

// The default profile's snapshot, read from counters, holds the groups a
// walk of the live set finds: plain tensors by site and shape, and apart
// from them those an extra owner holds, those the collector found dropped,
// and the shapes past a site's slots.
func TestCountedSnapshotMatchesTheWalk(t *testing.T) {
	tr := newTracker(t, track.OnLeak(func(track.LeakReport) {}), track.ReclaimLeaks(false))
	ctx := track.WithLabels(context.Background(), "request", "r1")
	var recs []*track.Record
	for range 5 {
		recs = append(recs, recordA(tr, ctx, 64, "tensor"))
	}
	recs = append(recs, manyShapes(tr, 100)...) // past the 64 slots of one site
	held := recordA(tr, ctx, 32, "kv")
	view := tr.Books().CallerSite(0)
	held.Hold(view, "View")
	held.Unhold(nil, "") // the own handle freed: the View holds it
	dropped := recordA(tr, ctx, 16, "tensor")
	dropped.ReportDropped(nil, "")
	released := recordA(tr, ctx, 8, "tensor")
	release(t, tr, released)

	counted, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{}})
	require.NoError(t, err)
	walked, err := tr.Snapshot().Select(track.Filter{LabelKeys: []string{}})
	require.NoError(t, err)
	// Past the site's 64 slots, the walk's groups are one other-shapes
	// group: the first 64 shapes keep theirs.
	many := recs[5].Site()
	var want []track.Group
	other := track.Group{Site: many, OtherShapes: true}
	for _, g := range walked.Groups {
		if g.Site == many && g.Shape[1] > 64 {
			other.Count += g.Count
			other.Bytes += g.Bytes
			continue
		}
		g.Oldest = time.Time{}
		want = append(want, g)
	}
	want = append(want, other)
	slices.SortStableFunc(want, func(a, b track.Group) int {
		return cmp.Or(cmp.Compare(a.Site.ID(), b.Site.ID()), cmp.Compare(b.Bytes, a.Bytes))
	})
	assert.Equal(t, groupsOf(want), groupsOf(counted.Groups))
	assert.Equal(t, int64(36), other.Count)
	assert.Equal(t, int64((65+100)*36/2), other.Bytes)
	require.Equal(t, len(walked.Sites), len(counted.Sites))
	for i := range walked.Sites {
		w, c := walked.Sites[i], counted.Sites[i]
		w.Oldest, c.Oldest = time.Time{}, time.Time{}
		assert.Equal(t, w, c, "site %v", w.Site)
	}
	release(t, tr, append(recs, held, dropped)...)
	empty, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{}})
	require.NoError(t, err)
	assert.Empty(t, empty.Groups, "nothing live, nothing counted")
}

// A site past its 64 slots keeps exact figures: the shapes past them are
// counted in one other-shapes group, a tensor there that an extra owner
// comes to hold moves to a group of its own, and releasing them all
// leaves nothing live.
func TestOtherShapesAreCountedExactly(t *testing.T) {
	tr := newTracker(t)
	recs := manyShapes(tr, 100)
	site := recs[0].Site()
	held := recs[99] // past the slots
	held.Hold(tr.Books().CallerSite(0), "View")
	held.Unhold(nil, "")

	snap, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{}})
	require.NoError(t, err)
	var other, special *track.Group
	shapes := 0
	for i := range snap.Groups {
		switch g := &snap.Groups[i]; {
		case g.OtherShapes:
			other = g
		case g.HeldBy != nil:
			special = g
		default:
			shapes++
		}
	}
	assert.Equal(t, 64, shapes, "the first 64 shapes keep groups of their own")
	require.NotNil(t, other)
	assert.Equal(t, int64(35), other.Count)
	assert.Equal(t, int64((65+99)*35/2), other.Bytes)
	require.NotNil(t, special)
	assert.Equal(t, []int{1, 100}, special.Shape)
	st := snap.Sites[0]
	require.Same(t, site, st.Site)
	assert.Equal(t, int64(100), st.LiveCount)
	assert.Equal(t, int64(100*101/2), st.LiveBytes)
	assert.Equal(t, site.Stats().LiveBytes, st.LiveBytes)

	release(t, tr, recs...)
	st = site.Stats()
	assert.Equal(t, [3]int64{0, 0, 100}, [3]int64{st.LiveCount, st.LiveBytes, st.AllocCount})
	empty, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{}})
	require.NoError(t, err)
	assert.Empty(t, empty.Groups)
}

// TopSites is the head of SiteTotals' order, sites with nothing live left
// out, without sorting every site.
func TestTopSitesIsTheHeadOfSiteTotals(t *testing.T) {
	tr := newTracker(t)
	recs := manyShapes(tr, 10)
	for i := range 5 {
		recs = append(recs, recordA(tr, context.Background(), int64(8*(i+1)), "tensor"))
	}
	big := &track.Record{Bytes: 1 << 20, Meta: track.InternMeta("weights", "host", "float32", nil)}
	require.NoError(t, tr.Books().Record(context.Background(), big, 0)) // a third site, the largest
	recs = append(recs, big)
	freed := recordA(tr, context.Background(), 4, "kv")
	release(t, tr, freed)
	var live []track.SiteStats
	for _, st := range tr.SiteTotals() {
		if st.LiveBytes > 0 {
			live = append(live, st)
		}
	}
	require.Len(t, live, 3)
	require.Same(t, big.Site(), live[0].Site)
	for n := range len(live) + 2 {
		want := live[:min(n, len(live))]
		if n == 0 {
			want = nil
		}
		assert.Equal(t, want, tr.TopSites(n), "n=%d", n)
	}
	release(t, tr, recs...)
	assert.Empty(t, tr.TopSites(3))
}

// Counts keeps the moment it was taken: its snapshot is the counted one of
// then, however the live set changed before it was built.
func TestCountsKeepTheMoment(t *testing.T) {
	tr := newTracker(t)
	recs := manyShapes(tr, 70)
	recs = append(recs, recordA(tr, context.Background(), 64, "tensor"))
	then, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{}})
	require.NoError(t, err)
	snapshot := tr.Books().CopyCounts()
	release(t, tr, recs...)

	got := snapshot()
	assert.Equal(t, groupsOf(then.Groups), groupsOf(got.Groups))
	assert.Equal(t, then.Sites, got.Sites)
	assert.Equal(t, then.Totals.LiveBytes, got.Totals.LiveBytes)
	assert.Equal(t, then.TrackerName, got.TrackerName)
	assert.NotSame(t, got, snapshot(), "each call builds a snapshot of its own")
	now, err := tr.SnapshotOf(track.Filter{LabelKeys: []string{}})
	require.NoError(t, err)
	assert.Empty(t, now.Groups)
}
