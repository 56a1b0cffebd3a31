package track_test

import (
	"context"
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// handOverHere hands r to o from a line of its own.
//
//go:noinline
func handOverHere(t *testing.T, r *track.Record, o *track.Owner) {
	require.NoError(t, r.HandOver(o))
}

// OwnerStats.First is the line of the owner's first hand-over, as its doc
// says, not the line that made the record.
func TestOwnerFirstIsTheHandOverLine(t *testing.T) {
	tr := newTracker(t)
	o := &track.Owner{Name: "cache", MaxBytes: 1 << 20}
	r := recordA(tr, context.Background(), 64, "mask")
	handOverHere(t, r, o)
	owners := tr.Owners()
	require.Len(t, owners, 1)
	require.NotNil(t, owners[0].First)
	assert.Equal(t, "github.com/tensorlife/tensorlife/track_test.handOverHere", owners[0].First.UserFrames()[0].Function)
	assert.NotSame(t, r.Site(), owners[0].First)
	release(t, tr, r)
}

// An Owner refers to no tracker strongly, and nothing it holds does: an
// owner used with 200 trackers keeps none of them alive once they are
// dropped (its books keep sites, and a site refers to its tracker's feeds
// only, which are not the tracker).
func TestAnOwnerKeepsNoTrackerAlive(t *testing.T) {
	o := &track.Owner{Name: "shared", MaxBytes: 1 << 30}
	var trackers []weak.Pointer[track.Tracker]
	for range 200 {
		tr, err := track.New()
		require.NoError(t, err)
		r := recordA(tr, context.Background(), 64, "mask")
		handOverHere(t, r, o)
		require.NoError(t, r.HandBack(o))
		require.NoError(t, r.Release())
		trackers = append(trackers, weak.Make(tr))
	}
	runtime.GC()
	runtime.GC()
	alive := 0
	for _, w := range trackers {
		if w.Value() != nil {
			alive++
		}
	}
	assert.Zero(t, alive, "trackers the owner was used with are collected")
	runtime.KeepAlive(o)
}

// ChangedOwners drains what it returned: the first call lists every owner
// (what was queued before it included), and a second call with no change
// between returns nothing; an owner changed after is returned once.
func TestChangedOwnersDrainsWhatItReturned(t *testing.T) {
	tr := newTracker(t)
	feed := tr.Books().NewSiteFeed()
	defer feed.Close()
	const n = 1000
	var rs []*track.Record
	owners := make([]*track.Owner, n)
	for i := range owners {
		owners[i] = &track.Owner{Name: "o", MaxBytes: 1 << 20}
		r := recordA(tr, context.Background(), 8, "mask")
		require.NoError(t, r.HandOver(owners[i]))
		rs = append(rs, r)
	}
	assert.Len(t, feed.ChangedOwners(nil), n, "the first call lists every owner")
	assert.Empty(t, feed.ChangedOwners(nil), "nothing changed since")
	var sites []track.SiteStats
	sites = feed.Changed(sites)
	assert.Empty(t, feed.Changed(sites[:0]), "sites drain alike")

	require.NoError(t, rs[7].HandBack(owners[7]))
	got := feed.ChangedOwners(nil)
	require.Len(t, got, 1)
	assert.Zero(t, got[0].Count)
	assert.Empty(t, feed.ChangedOwners(nil))
	for i, r := range rs {
		if i != 7 {
			require.NoError(t, r.HandBack(owners[i]))
		}
	}
	release(t, tr, rs...)
}
