package track_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

func TestHistoryOffByDefault(t *testing.T) {
	_, err := newTracker(t).History()
	assert.ErrorIs(t, err, track.ErrHistoryOff)
	_, err = track.New(track.KeepHistory(0))
	assert.ErrorIs(t, err, track.ErrInvalidOption)
	_, err = track.New(track.KeepHistory(-5))
	assert.ErrorIs(t, err, track.ErrInvalidOption)
	// A bound, not an out-of-memory crash: each event costs about 64 bytes.
	_, err = track.New(track.KeepHistory(1 << 40))
	assert.ErrorIs(t, err, track.ErrInvalidOption)
	assert.ErrorContains(t, err, "KeepHistory")
	_, err = track.New(track.KeepHistory(1<<22 + 1))
	assert.ErrorIs(t, err, track.ErrInvalidOption)
}

func TestHistoryRecordsEventsInOrder(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1024))
	ctx := track.WithLabels(context.Background(), "request", "r1")
	a := recordA(tr, ctx, 16, "tensor")
	b := recordB(tr, ctx, 8)
	require.NoError(t, a.Release())
	tr.Books().Note(track.EventOOM, b.Site(), 1<<20)
	tr.Books().Note(track.EventAlloc, nil, 1) // recorded by the tracker itself: ignored

	log, err := tr.History()
	require.NoError(t, err)
	assert.Zero(t, log.Dropped)
	var kinds []track.EventKind
	for _, e := range log.Events {
		kinds = append(kinds, e.Kind)
	}
	assert.Equal(t, []track.EventKind{track.EventAlloc, track.EventAlloc, track.EventFree, track.EventOOM}, kinds)
	assert.Equal(t, a.ID(), log.Events[0].ID)
	assert.Equal(t, "tensor", log.Events[0].AllocKind)
	assert.Equal(t, "host", log.Events[0].Device, "an allocation's event names its device")
	assert.Equal(t, "host", log.Events[2].Device, "and so does its free")
	assert.Empty(t, log.Events[3].Device, "a noted OOM has no record to name one")
	assert.EqualValues(t, 16, log.Events[2].Bytes)
	assert.Same(t, a.Site(), log.Events[2].Site)
	v, _ := log.Events[1].Labels.Get("request")
	assert.Equal(t, "r1", v)
	for i := 1; i < len(log.Events); i++ {
		assert.LessOrEqual(t, log.Events[i-1].Time, log.Events[i].Time)
	}
	tt := tr.Totals()
	assert.EqualValues(t, 2, tt.Event(track.EventAlloc))
	assert.EqualValues(t, 1, tt.Event(track.EventFree))
	assert.EqualValues(t, 1, tt.Event(track.EventOOM))
	require.NoError(t, b.Release())
}

func TestHistoryCountsWhatItDrops(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1)) // 16 events per shard at least
	ctx := context.Background()
	for range 5000 {
		require.NoError(t, (recordA(tr, ctx, 4, "tensor")).Release())
	}
	log, err := tr.History()
	require.NoError(t, err)
	assert.Equal(t, log.Capacity, len(log.Events), "a full history keeps exactly its capacity")
	assert.EqualValues(t, 10000-len(log.Events), log.Dropped, "every overwritten event is counted")
	last := log.Events[len(log.Events)-1]
	assert.Equal(t, track.EventFree, last.Kind, "the newest events are kept")
	assert.Positive(t, log.DroppedUntil)
	assert.Less(t, log.DroppedUntil, last.Time)
	// Every event after DroppedUntil is kept: none of the last allocations
	// (recorded after every dropped one) is missing its free.
	allocs, frees := 0, 0
	for _, e := range log.Events {
		if e.Time > log.DroppedUntil {
			switch e.Kind {
			case track.EventAlloc:
				allocs++
			case track.EventFree:
				frees++
			}
		}
	}
	assert.InDelta(t, allocs, frees, 1)
}
