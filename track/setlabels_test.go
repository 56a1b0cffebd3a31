package track_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

func TestSetLabels(t *testing.T) {
	tr := newTracker(t)
	ctx := track.WithLabels(context.Background(), "request", "r1")
	r := recordA(tr, ctx, 64, "mask")
	require.NoError(t, r.SetLabels(track.NewLabels("cache", "prompts")))
	assert.Equal(t, "{cache=prompts}", r.Labels().String())
	snap, err := tr.SnapshotOf(track.Filter{Labels: map[string]string{"request": "r1"}})
	require.NoError(t, err)
	assert.Empty(t, snap.Groups, "relabelled away from r1")
	snap, err = tr.SnapshotOf(track.Filter{Labels: map[string]string{"cache": "prompts"}})
	require.NoError(t, err)
	require.Len(t, snap.Groups, 1)

	misuse := tr.Totals().Misuse
	assert.ErrorIs(t, (*track.Record)(nil).SetLabels(track.Labels{}), track.ErrMisuse)
	assert.ErrorIs(t, (&track.Record{}).SetLabels(track.Labels{}), track.ErrMisuse)
	require.NoError(t, r.Release())
	assert.ErrorIs(t, r.SetLabels(track.Labels{}), track.ErrMisuse)
	assert.Equal(t, misuse+1, tr.Totals().Misuse, "only the released record has a tracker to count it")
}

// TestSetLabelsRacesSnapshots is for -race: labels are replaced while
// snapshots read them.
func TestSetLabelsRacesSnapshots(t *testing.T) {
	tr := newTracker(t)
	r := recordA(tr, context.Background(), 64, "mask")
	a, b := track.NewLabels("cache", "a"), track.NewLabels("cache", "b")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 200 {
			l := a
			if i%2 == 1 {
				l = b
			}
			assert.NoError(t, r.SetLabels(l))
		}
	}()
	for range 50 {
		snap := tr.Snapshot()
		require.Len(t, snap.Groups, 1)
		v, _ := snap.Groups[0].Labels.Get("cache")
		assert.Contains(t, []string{"", "a", "b"}, v)
	}
	wg.Wait()
	require.NoError(t, r.Release())
}
