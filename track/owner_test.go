package track_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// TestHandBackReturnsToTheRequest guards that ownership has an end: what an
// owner lets go of is its request's again, outlived if the request ended.
func TestHandBackReturnsToTheRequest(t *testing.T) {
	tr := newTracker(t)
	cache := &track.Owner{Name: "cache", MaxBytes: 1 << 20}
	ctx, end := track.WithRequest(context.Background())
	open := recordA(tr, ctx, 10, "mask")
	closed := recordA(tr, ctx, 100, "mask")
	require.NoError(t, open.HandOver(cache))
	require.NoError(t, closed.HandOver(cache))
	end()
	assert.Zero(t, outlived(t, tr), "a bounded owner holds both")

	require.NoError(t, closed.HandBack(cache))
	assert.Equal(t, int64(100), outlived(t, tr), "back to a request that has ended: outlived")

	ctx2, end2 := track.WithRequest(context.Background())
	inFlight := recordA(tr, ctx2, 1000, "mask")
	require.NoError(t, inFlight.HandOver(cache))
	require.NoError(t, inFlight.HandBack(cache))
	assert.Equal(t, int64(100), outlived(t, tr), "back to an open request: in flight")
	end2()
	assert.Equal(t, int64(1100), outlived(t, tr), "and outlived once it ends")

	none := recordA(tr, context.Background(), 1, "weights")
	require.NoError(t, none.HandOver(cache))
	assert.Equal(t, int64(1100), outlived(t, tr))
	require.NoError(t, none.HandBack(cache))
	assert.Equal(t, int64(1101), outlived(t, tr), "made under no request: outlived again")

	assert.ErrorIs(t, none.HandBack(cache), track.ErrMisuse, "not handed over")
	release(t, tr, open, closed, inFlight, none)
	assert.Zero(t, outlived(t, tr))
	assert.Empty(t, tr.Owners(), "an owner holding nothing is not listed")
}

// TestTwoOwnersHoldUntilEachLetsGo: a record handed to two owners is held
// by both, each until it lets go itself; each HandOver of one owner is
// undone by one HandBack of that owner, and neither ends the other's.
func TestTwoOwnersHoldUntilEachLetsGo(t *testing.T) {
	tr := newTracker(t)
	a, b := &track.Owner{Name: "a", MaxBytes: 1 << 20}, &track.Owner{Name: "b", MaxBytes: 1 << 20}
	ctx, end := track.WithRequest(context.Background())
	r := recordA(tr, ctx, 64, "mask")
	end()
	require.NoError(t, r.HandOver(a))
	require.NoError(t, r.HandOver(b))
	require.NoError(t, r.HandOver(b))
	owners := tr.Owners()
	require.Len(t, owners, 2, "both hold it")
	assert.Equal(t, []string{"a", "b"}, []string{owners[0].Name, owners[1].Name})
	require.NoError(t, r.HandBack(a))
	require.Len(t, tr.Owners(), 1, "a let go; b holds it still")
	assert.Equal(t, "b", tr.Owners()[0].Name)
	assert.Zero(t, outlived(t, tr), "b holds it")
	assert.ErrorIs(t, r.HandBack(a), track.ErrMisuse, "a holds it no more")
	require.NoError(t, r.HandBack(b))
	assert.Zero(t, outlived(t, tr), "one hand-over of b remains")
	require.NoError(t, r.HandBack(b))
	assert.Equal(t, int64(64), outlived(t, tr), "back to its ended request")
	assert.Empty(t, tr.Owners())
	release(t, tr, r)
}

// TestOwnersOfOneNameAreTwoOwners: each owner has books of its own, told
// apart by ID and the line of its first hand-over; one owner used with two
// trackers has books in each.
func TestOwnersOfOneNameAreTwoOwners(t *testing.T) {
	tr, other := newTracker(t), newTracker(t)
	x, y := &track.Owner{Name: "cache"}, &track.Owner{Name: "cache"}
	r1 := recordA(tr, context.Background(), 10, "mask")
	r2 := recordA(tr, context.Background(), 20, "mask")
	r3 := recordA(other, context.Background(), 40, "mask")
	require.NoError(t, r1.HandOver(x))
	require.NoError(t, r2.HandOver(y))
	require.NoError(t, r3.HandOver(x))
	owners := tr.Owners()
	require.Len(t, owners, 2)
	assert.NotEqual(t, owners[0].ID, owners[1].ID)
	assert.Equal(t, int64(20), owners[0].Bytes)
	assert.Equal(t, int64(10), owners[1].Bytes, "x's books in tr hold only what tr recorded")
	assert.NotNil(t, owners[0].First)
	require.Len(t, other.Owners(), 1)
	assert.Equal(t, int64(40), other.Owners()[0].Bytes)
	release(t, tr, r1, r2)
	release(t, other, r3)
}

// TestOwnerBoundIsChecked guards that a bound is counted, not trusted: an
// owner declared with 64 KiB holding more is over its bound, with the lines
// that filled it.
func TestOwnerBoundIsChecked(t *testing.T) {
	tr := newTracker(t)
	o := &track.Owner{Name: "prompt cache", MaxBytes: 64 << 10}
	var recs []*track.Record
	for range 50 {
		r := recordA(tr, context.Background(), 64<<10, "mask")
		require.NoError(t, r.HandOver(o))
		recs = append(recs, r)
	}
	owners := tr.Owners()
	require.Len(t, owners, 1)
	s := owners[0]
	assert.Equal(t, "prompt cache", s.Name)
	assert.Equal(t, int64(64<<10), s.MaxBytes)
	assert.Equal(t, int64(50), s.Count)
	assert.Equal(t, int64(50*64<<10), s.Bytes)
	assert.True(t, s.OverBound())
	require.Len(t, s.Sites, 1)
	assert.Same(t, recs[0].Site(), s.Sites[0].Site, "the line that filled it")
	release(t, tr, recs[1:]...)
	s = tr.Owners()[0]
	assert.False(t, s.OverBound(), "within its bound again")
	release(t, tr, recs[0])
}
