package track_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// outlived reads the tracker's outlived figures, as Totals and the only
// site's counters give them; they must agree.
func outlived(t *testing.T, tr *track.Tracker) int64 {
	t.Helper()
	var sum int64
	for _, s := range tr.SiteTotals() {
		sum += s.OutlivedBytes
	}
	require.Equal(t, sum, tr.Totals().OutlivedBytes, "Totals and the sites agree")
	return sum
}

func TestRequestLifetimes(t *testing.T) {
	tr := newTracker(t)
	ctx, end := track.WithRequest(context.Background())
	inFlight := recordA(tr, ctx, 100, "tensor")
	kept := recordA(tr, ctx, 10, "tensor")
	assert.Zero(t, outlived(t, tr), "nothing outlives a request in flight")

	release(t, tr, inFlight)
	end()
	end() // a second end does nothing
	assert.Equal(t, int64(10), outlived(t, tr), "what is live at the end outlived the request")
	snap, err := tr.SnapshotOf(track.Filter{Outlived: true, Allocations: true})
	require.NoError(t, err)
	require.Len(t, snap.Allocations, 1)
	assert.Equal(t, kept.ID(), snap.Allocations[0].ID)
	assert.True(t, snap.Allocations[0].Outlived)
	assert.True(t, snap.Allocations[0].MadeUnder(ctx))

	late := recordA(tr, ctx, 1, "tensor") // a goroutine of the request, after it ended
	assert.Equal(t, int64(11), outlived(t, tr))
	release(t, tr, kept, late)
	assert.Zero(t, outlived(t, tr), "releasing an outlived tensor takes it back")

	none := recordA(tr, context.Background(), 5, "weights")
	assert.Equal(t, int64(5), outlived(t, tr), "made under no request: outlived from the start")
	release(t, tr, none)
}

func TestRequestEndsWithItsContext(t *testing.T) {
	tr := newTracker(t)
	parent, cancel := context.WithCancel(context.Background())
	ctx := track.WithLabels(parent, "request", "r1") // begins a request that ends with parent
	r := recordA(tr, ctx, 64, "tensor")
	inner := track.WithLabels(ctx, "model", "m") // the same request
	r2 := recordA(tr, inner, 32, "tensor")
	assert.Zero(t, outlived(t, tr))
	cancel()
	assert.Equal(t, int64(96), outlived(t, tr), "the very next read sees the request's end")
	release(t, tr, r, r2)

	bg := track.WithLabels(context.Background(), "request", "r2") // cannot end: no request
	r3 := recordA(tr, bg, 8, "tensor")
	assert.Equal(t, int64(8), outlived(t, tr))
	release(t, tr, r3)
}

func TestHandOver(t *testing.T) {
	tr := newTracker(t)
	bounded := &track.Owner{Name: "prompt cache", MaxBytes: 1 << 20}
	unbounded := &track.Owner{Name: "session store"}

	ctx, end := track.WithRequest(context.Background())
	cached := recordA(tr, ctx, 100, "mask")
	stored := recordA(tr, ctx, 10, "kv")
	require.NoError(t, cached.HandOver(bounded))
	require.NoError(t, stored.HandOver(unbounded))
	assert.Equal(t, int64(10), outlived(t, tr), "an owner without a bound is judged at once")
	end()
	assert.Equal(t, int64(10), outlived(t, tr), "what a bounded owner holds never outlives its request")

	require.NoError(t, stored.HandOver(bounded))
	require.NoError(t, stored.HandBack(unbounded))
	assert.Zero(t, outlived(t, tr), "moved to a bounded owner")
	require.NoError(t, cached.HandOver(unbounded))
	assert.Equal(t, int64(100), outlived(t, tr), "an unbounded owner holds it too: judged")
	require.NoError(t, cached.HandBack(bounded))
	assert.Equal(t, int64(100), outlived(t, tr), "moved to an unbounded owner")

	snap := tr.Snapshot()
	owners := map[uint64]*track.Owner{}
	for _, a := range snap.Allocations {
		owners[a.ID] = a.Owner
	}
	assert.Same(t, unbounded, owners[cached.ID()])
	assert.Same(t, bounded, owners[stored.ID()])

	assert.ErrorIs(t, cached.HandOver(nil), track.ErrMisuse)
	release(t, tr, cached, stored)
	assert.Zero(t, outlived(t, tr))
	assert.ErrorIs(t, cached.HandOver(bounded), track.ErrMisuse, "a released record")
}

func TestRequestFilterFindsRelabeledTensors(t *testing.T) {
	tr := newTracker(t)
	ctx, end := track.WithRequest(context.Background())
	defer end()
	r := recordA(tr, ctx, 64, "mask")
	require.NoError(t, r.SetLabels(track.NewLabels("cache", "c")))
	require.NoError(t, r.HandOver(&track.Owner{Name: "c", MaxBytes: 1024}))
	other := recordA(tr, context.Background(), 64, "mask")
	snap, err := tr.SnapshotOf(track.Filter{Request: ctx, Allocations: true})
	require.NoError(t, err)
	require.Len(t, snap.Allocations, 1)
	assert.Equal(t, r.ID(), snap.Allocations[0].ID)
	sel, err := tr.Snapshot().Select(track.Filter{Request: ctx})
	require.NoError(t, err)
	require.Len(t, sel.Allocations, 1, "Select filters by request as SnapshotOf does")
	_, err = tr.SnapshotOf(track.Filter{Request: context.Background()})
	assert.ErrorIs(t, err, track.ErrInvalidOption, "a context under no request")
	release(t, tr, r, other)
}

// TestRequestEndRacesRelease is for -race: a request ends while other
// goroutines release and hand over what it made.
func TestRequestEndRacesRelease(t *testing.T) {
	tr := newTracker(t)
	owner := &track.Owner{Name: "cache", MaxBytes: 1 << 30}
	for range 50 {
		ctx, end := track.WithRequest(context.Background())
		recs := make([]*track.Record, 64)
		for i := range recs {
			recs[i] = recordA(tr, ctx, 8, "tensor")
		}
		var wg sync.WaitGroup
		wg.Go(end)
		wg.Go(func() {
			for _, r := range recs[:32] {
				if err := r.Release(); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Go(func() {
			for _, r := range recs[32:48] {
				if err := r.HandOver(owner); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Wait()
		assert.Equal(t, int64(16*8), outlived(t, tr), "the 16 neither released nor handed over outlived it")
		release(t, tr, recs[32:]...)
		assert.Zero(t, outlived(t, tr))
	}
}

// BeginRequest's end is seen at once by every reader, and so is the end
// of the context it was begun on, as a labelled request's is, with no
// cancellable context derived.
func TestBeginRequestEndsAtItsEndOrWithItsContext(t *testing.T) {
	tr := newTracker(t)
	ctx, end := track.BeginRequest(context.Background(), "route", "POST /generate")
	kept := recordA(tr, ctx, 10, "tensor")
	assert.Nil(t, ctx.Done(), "no context derived: a background one cannot end")
	v, _ := track.LabelsFrom(ctx).Get("route")
	assert.Equal(t, "POST /generate", v)
	assert.Zero(t, outlived(t, tr))
	end()
	assert.Equal(t, int64(10), outlived(t, tr), "the end is seen at once")
	release(t, tr, kept)

	parent, cancel := context.WithCancel(context.Background())
	ctx, end = track.BeginRequest(parent)
	defer end()
	kept = recordA(tr, ctx, 20, "tensor")
	assert.Zero(t, outlived(t, tr))
	cancel()
	assert.Equal(t, int64(20), outlived(t, tr), "its context's end is its end")
	release(t, tr, kept)
}
