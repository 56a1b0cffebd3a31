package watch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

//go:noinline
func fillOwner(t testing.TB, tr *track.Tracker, o *track.Owner) *track.Record {
	r := record(t, context.Background(), tr, 64<<10)
	require.NoError(t, r.HandOver(o))
	return r
}

// TestOwnerOverItsBoundIsASuspect guards that a bound is checked, not
// trusted: an owner declared with 64 KiB that holds 3.2 MiB is one suspect
// naming the owner and the line that fills it, for as long as it is over,
// and none once it is back within its bound.
func TestOwnerOverItsBoundIsASuspect(t *testing.T) {
	tr, w, log := watchedTracker(t, "owner")
	o := &track.Owner{Name: "prompt cache", MaxBytes: 64 << 10}
	var held []*track.Record
	for range 50 {
		held = append(held, fillOwner(t, tr, o))
		require.NoError(t, w.Tick())
	}
	reported := log.all()
	require.Len(t, reported, 1, "flagged once, however long it stays over")
	s := reported[0]
	assert.True(t, s.IsOwner())
	assert.Equal(t, "prompt cache", s.Owner)
	assert.Equal(t, int64(64<<10), s.OwnerMaxBytes)
	assert.Equal(t, "github.com/tensorlife/tensorlife/track/watch_test.fillOwner", s.Site.Location().Function,
		"the line that fills it")
	current := w.Suspects()
	require.Len(t, current, 1)
	assert.Equal(t, int64(50*64<<10), current[0].OutlivedBytes, "what it holds now")
	assert.Equal(t, 1, w.SuspectCount())

	release(t, tr, held[1:]...)
	require.NoError(t, w.Tick())
	assert.Empty(t, w.Suspects(), "within its bound again")
	assert.Zero(t, w.SuspectCount())
	release(t, tr, held[0])
}

// TestBoundedOwnerWithinItsBoundIsNotJudged: a bounded cache that keeps
// its bound is never a suspect, however long it holds what it keeps.
func TestBoundedOwnerWithinItsBoundIsNotJudged(t *testing.T) {
	tr, w, log := watchedTracker(t, "bounded")
	o := &track.Owner{Name: "cache", MaxBytes: 1 << 20}
	var held []*track.Record
	for range 200 {
		held = append(held, fillOwner(t, tr, o))
		if len(held) > 8 { // an LRU of 8 entries: evict the oldest
			release(t, tr, held[0])
			held = held[1:]
		}
		require.NoError(t, w.Tick())
	}
	assert.Empty(t, log.all())
	release(t, tr, held...)
}
