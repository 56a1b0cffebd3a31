package track_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// GroupsOf reads, one at a time, the groups SnapshotOf holds, in its
// order, beside the same snapshot: over request ids, a second label,
// tensors of two sites, sizes and kinds, a Meta alike an interned one in
// content, tensors an extra owner holds, tensors the collector found
// dropped and tensors that outlived their request, under every kind of
// filter, those read from counters among them.
func TestGroupsOfReadsSnapshotOfGroups(t *testing.T) {
	clk := &fakeClock{now: time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)}
	tr := newTracker(t, track.Clock(clk.Now), track.OnLeak(func(track.LeakReport) {}), track.ReclaimLeaks(false))
	var recs []*track.Record
	for i := range 300 {
		ctx := track.WithLabels(context.Background(), "request", fmt.Sprintf("r%03d", i%120))
		if i%3 == 0 {
			ctx = track.WithLabels(ctx, "model", "m")
		}
		recs = append(recs, recordA(tr, ctx, int64(4*(1+i%5)), "tensor"))
		if i%7 == 0 {
			recs = append(recs, recordB(tr, ctx, int64(1+i%2)))
		}
		clk.advance(time.Millisecond)
	}
	alike := &track.Record{Bytes: 8, Meta: &track.Meta{Kind: "tensor", Device: "host", DType: "float32", Shape: []int{2}}}
	require.NoError(t, tr.Books().Record(track.WithLabels(context.Background(), "request", "r001"), alike, 0))
	recs = append(recs, alike)
	recs[3].Hold(tr.Books().CallerSite(0), "View")
	recs[3].Unhold(nil, "") // the own handle freed: the View holds it
	(recs[5]).ReportDropped(nil, "")
	ctx, end := track.WithRequest(track.WithLabels(context.Background(), "request", "r002"))
	recs = append(recs, recordA(tr, ctx, 16, "kv"), recordA(tr, ctx, 16, "kv"))
	end()
	t.Cleanup(func() { release(t, tr, recs...) })

	for _, f := range []track.Filter{
		{},
		{LabelKeys: []string{}},
		{LabelKeys: []string{"request"}},
		{LabelKeys: []string{"request", "model"}},
		{LabelKeys: []string{"model"}},
		{LabelKeys: []string{"absent"}},
		{Kind: "mask", LabelKeys: []string{"request"}},
		{Outlived: true, LabelKeys: []string{"request"}},
		{Allocations: true},
		{Oldest: true, LabelKeys: []string{}},
	} {
		want, err := tr.SnapshotOf(f)
		require.NoError(t, err)
		snap, groups, err := tr.Books().GroupsOf(f)
		require.NoError(t, err)
		assert.Nil(t, snap.Groups, "filter %+v: the groups are read apart", f)
		var got []track.Group
		for g := range groups.All() {
			got = append(got, *g)
		}
		require.NotEmpty(t, got, "filter %+v", f)
		assert.Equal(t, len(got), groups.Len())
		assert.Equal(t, want.Groups, got, "filter %+v", f)
		snap.Groups = got
		assert.Equal(t, want, snap, "filter %+v", f)

		var again []track.Group // read twice, and stopped early
		for g := range groups.All() {
			again = append(again, *g)
			break
		}
		assert.Equal(t, got[:1], again)
	}

	_, _, err := tr.Books().GroupsOf(track.Filter{MinAge: -time.Second})
	assert.ErrorIs(t, err, track.ErrInvalidOption)
}

// Groups are immutable once taken: goroutines that read them at once, while
// tensors are recorded and released, each read the same groups.
func TestGroupsAreReadConcurrently(t *testing.T) {
	tr := newTracker(t)
	var recs []*track.Record
	for i := range 200 {
		recs = append(recs, recordA(tr, track.WithLabels(context.Background(), "request", fmt.Sprint(i)), 8, "tensor"))
	}
	t.Cleanup(func() { release(t, tr, recs...) })
	snap, groups, err := tr.Books().GroupsOf(track.Filter{LabelKeys: []string{"request"}})
	require.NoError(t, err)
	require.Nil(t, snap.Groups)
	var want []track.Group
	for g := range groups.All() {
		want = append(want, *g)
	}
	require.Len(t, want, 200)

	var wg sync.WaitGroup
	got := make([][]track.Group, 4)
	for i := range got {
		wg.Go(func() {
			for g := range groups.All() {
				got[i] = append(got[i], *g)
			}
		})
	}
	wg.Go(func() { // the live set changes meanwhile; the groups taken do not
		for range 50 {
			assert.NoError(t, (recordA(tr, context.Background(), 8, "tensor")).Release())
		}
	})
	wg.Wait()
	for i := range got {
		assert.Equal(t, want, got[i], "reader %d", i)
	}
}
