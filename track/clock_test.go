package track_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// fakeClock moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A tracker reads its clock for its start, ages and snapshot times, so a
// test ages tensors without waiting.
func TestClockAgesWithoutWaiting(t *testing.T) {
	clk := &fakeClock{now: time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)}
	tr := newTracker(t, track.Clock(clk.Now))
	assert.Equal(t, clk.Now(), tr.Started())
	old := &track.Record{Bytes: 8, Meta: track.InternMeta("tensor", "", "", nil)}
	require.NoError(t, tr.Books().Record(context.Background(), old, 0))
	clk.advance(time.Hour)
	young := &track.Record{Bytes: 8, Meta: track.InternMeta("tensor", "", "", nil)}
	require.NoError(t, tr.Books().Record(context.Background(), young, 0))
	defer release(t, tr, old, young)

	snap, err := tr.SnapshotOf(track.Filter{MinAge: time.Minute, Allocations: true})
	require.NoError(t, err)
	require.Len(t, snap.Allocations, 1)
	assert.Equal(t, old.ID(), snap.Allocations[0].ID)
	assert.Equal(t, time.Hour, snap.Time.Sub(snap.Allocations[0].Time))
	assert.Equal(t, clk.Now(), snap.Time)

	_, err = track.New(track.Clock(nil))
	assert.ErrorIs(t, err, track.ErrInvalidOption)
}
