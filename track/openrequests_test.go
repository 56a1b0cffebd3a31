package track_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

func TestOpenRequestsLargestAndOldest(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	tr := newTracker(t, track.Clock(clk.Now))

	old, endOld := track.WithRequest(context.Background())
	old = track.WithLabels(old, "route", "/old")
	var recs []*track.Record
	recs = append(recs, recordA(tr, old, 100, "tensor"))
	clk.advance(time.Minute)

	big, endBig := track.WithRequest(context.Background())
	bigL := track.WithLabels(big, "route", "/big")
	recs = append(recs, recordA(tr, bigL, 1000, "tensor"), recordB(tr, bigL, 3000))
	peakGone := recordA(tr, track.WithLabels(bigL, "layer", "1"), 5000, "tensor")
	require.NoError(t, peakGone.Release()) // its peak stays
	clk.advance(time.Minute)

	ended, endEnded := track.WithRequest(context.Background())
	recs = append(recs, recordA(tr, ended, 7, "tensor"))
	endEnded() // not open: its tensor outlived it
	small, endSmall := track.WithRequest(context.Background())
	recs = append(recs, recordA(tr, small, 10, "tensor"))
	clk.advance(time.Minute)

	got := tr.OpenRequests(2)
	assert.Equal(t, 3, got.Count)
	assert.Equal(t, int64(100+4000+10), got.InFlightBytes)
	assert.Equal(t, int64(4), got.InFlightTensors)
	assert.Equal(t, 3*time.Minute, got.OldestAge)
	require.Len(t, got.Largest, 2)
	b := got.Largest[0]
	assert.Equal(t, int64(4000), b.InFlightBytes)
	assert.Equal(t, int64(2), b.InFlightTensors)
	assert.Equal(t, int64(9000), b.PeakBytes, "the most it held, the released tensor included")
	assert.Equal(t, 2*time.Minute, b.Age)
	assert.True(t, clk.Now().Add(-2*time.Minute).Equal(b.Begun), "begun at %v", b.Begun)
	assert.Equal(t, "{layer=1, route=/big}", b.Labels.String(), "the labels with most keys")
	assert.Equal(t, int64(3000), b.TopSiteBytes)
	require.NotNil(t, b.TopSite)
	assert.Contains(t, b.TopSite.Location().Function, "recordB")
	assert.Equal(t, "host", b.Device)
	assert.Equal(t, int64(100), got.Largest[1].InFlightBytes)
	assert.Equal(t, int64(10), got.OthersBytes)
	assert.Equal(t, 1, got.OthersCount)
	sum := got.OthersBytes
	for _, r := range got.Largest {
		sum += r.InFlightBytes
	}
	assert.Equal(t, got.InFlightBytes, sum, "rows and others make the in-flight bytes")

	require.Len(t, got.Oldest, 2)
	assert.Equal(t, "{route=/old}", got.Oldest[0].Labels.String())
	assert.Equal(t, 3*time.Minute, got.Oldest[0].Age)
	assert.Equal(t, "{layer=1, route=/big}", got.Oldest[1].Labels.String())

	counts := tr.OpenRequests(0)
	assert.Equal(t, 3, counts.Count)
	assert.Empty(t, counts.Largest)
	assert.Equal(t, counts.InFlightBytes, counts.OthersBytes)

	endOld()
	endBig()
	endSmall()
	release(t, tr, recs...)
	none := tr.OpenRequests(5)
	assert.Zero(t, none.Count)
	assert.Zero(t, none.OldestAge)
	assert.Empty(t, none.Largest)
}

// A request begun by WithLabels ends with its context, and every reader
// sees that at once: OpenRequests lists it no more.
func TestOpenRequestsEndWithContexts(t *testing.T) {
	tr := newTracker(t)
	parent, cancel := context.WithCancel(context.Background())
	ctx := track.WithLabels(parent, "request", "r1")
	r := recordA(tr, ctx, 64, "tensor")
	r2 := recordA(tr, track.WithLabels(ctx, "layer", "2"), 32, "tensor") // the same request
	got := tr.OpenRequests(3)
	assert.Equal(t, 1, got.Count, "label calls on one context are one request")
	require.Len(t, got.Largest, 1)
	assert.Equal(t, int64(96), got.Largest[0].InFlightBytes)
	cancel()
	assert.Zero(t, tr.OpenRequests(3).Count)
	release(t, tr, r, r2)
}

// A worker that labels its long-lived context once and keeps 4 KiB a job
// is the first row of both lists within 400 jobs; nothing is judged.
func TestOpenRequestsLongLivedWorker(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	tr := newTracker(t, track.Clock(clk.Now))
	workerCtx, stop := context.WithCancel(context.Background())
	worker := track.WithLabels(workerCtx, "worker", "indexer")
	var kept []*track.Record
	for job := range 400 {
		clk.advance(time.Second)
		// a request per job beside it, each with its own tensor
		req, end := track.WithRequest(context.Background())
		r := recordA(tr, track.WithLabels(req, "job", "j"), 2048, "tensor")
		kept = append(kept, recordA(tr, worker, 4096, "tensor"))
		if job%50 == 0 {
			got := tr.OpenRequests(1)
			require.Len(t, got.Largest, 1)
			assert.Equal(t, "{worker=indexer}", got.Largest[0].Labels.String())
		}
		release(t, tr, r)
		end()
	}
	got := tr.OpenRequests(3)
	require.NotEmpty(t, got.Largest)
	assert.Equal(t, "{worker=indexer}", got.Largest[0].Labels.String())
	assert.Equal(t, int64(400*4096), got.Largest[0].InFlightBytes)
	assert.Equal(t, "{worker=indexer}", got.Oldest[0].Labels.String())
	assert.Equal(t, 399*time.Second, got.Oldest[0].Age, "begun at its first job")
	assert.Zero(t, tr.Totals().OutlivedBytes, "in flight, never judged")
	stop()
	release(t, tr, kept...)
}

// OpenRequests bounds its rows.
func TestOpenRequestsBounds(t *testing.T) {
	tr := newTracker(t)
	var recs []*track.Record
	var ends []context.CancelFunc
	for i := range track.MaxOpenRows + 10 {
		ctx, end := track.WithRequest(context.Background())
		recs = append(recs, recordA(tr, ctx, int64(4*(i+1)), "tensor"))
		ends = append(ends, end)
	}
	got := tr.OpenRequests(track.MaxOpenRows * 2)
	assert.Len(t, got.Largest, track.MaxOpenRows)
	assert.Len(t, got.Oldest, track.MaxOpenRows)
	assert.Equal(t, int64(4*(track.MaxOpenRows+10)), got.Largest[0].InFlightBytes)
	assert.Empty(t, tr.OpenRequests(-1).Largest)
	for _, end := range ends {
		end()
	}
	release(t, tr, recs...)
}

// Filter.InFlight selects what open requests hold in flight: neither what
// outlived its request nor what was handed to an owner.
func TestFilterInFlight(t *testing.T) {
	tr := newTracker(t)
	ctx, end := track.WithRequest(context.Background())
	held := recordA(tr, ctx, 100, "tensor")
	handed := recordA(tr, ctx, 10, "tensor")
	owner := &track.Owner{Name: "cache", MaxBytes: 1 << 20}
	require.NoError(t, handed.HandOver(owner))
	none := recordA(tr, context.Background(), 1, "tensor")

	snap, err := tr.SnapshotOf(track.Filter{InFlight: true, Allocations: true})
	require.NoError(t, err)
	require.Len(t, snap.Allocations, 1)
	assert.Equal(t, held.ID(), snap.Allocations[0].ID)
	assert.True(t, snap.Allocations[0].InFlight)

	all, err := tr.SnapshotOf(track.Filter{Allocations: true})
	require.NoError(t, err)
	sel, err := all.Select(track.Filter{InFlight: true})
	require.NoError(t, err)
	assert.Len(t, sel.Allocations, 1)

	_, err = tr.SnapshotOf(track.Filter{InFlight: true, Outlived: true})
	assert.ErrorIs(t, err, track.ErrInvalidOption)

	end()
	snap, err = tr.SnapshotOf(track.Filter{InFlight: true, Allocations: true})
	require.NoError(t, err)
	assert.Empty(t, snap.Allocations, "its request ended: outlived now")
	require.NoError(t, handed.HandBack(owner))
	release(t, tr, held, handed, none)
}
