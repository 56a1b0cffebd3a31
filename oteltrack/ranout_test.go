package oteltrack_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/oteltrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// A leak that filled its pool's budget stays a suspect on the metrics after
// it stops growing, with a forecast of 0 seconds left, until it is freed:
// the alerts on both keep firing while its memory is what ran out.
func TestMetricsKeepALeakThatFilledTheBudget(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(1<<20))
	require.NoError(t, err)
	w, err := watch.New(tr, watch.OnSuspect(func(watch.Suspect) {}))
	require.NoError(t, err)
	mp, collect := metricsReader(t)
	m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Stop()) }()

	var kept []*tensor.Tensor
	active := func() int64 {
		_, points := pointsOf(t, collect()["tensorlife.watcher.suspect.active"])
		return points[""]
	}
	for request := range 200 { // the budget is full after 16 requests
		ctx, end := track.WithRequest(context.Background())
		x, err := tensor.New(ctx, p, tensor.Uint8, 64<<10)
		if !errors.Is(err, tensor.ErrOutOfMemory) {
			require.NoError(t, err)
			kept = append(kept, x)
		}
		end()
		require.NoError(t, w.Tick())
		if request >= 10 {
			require.Equal(t, int64(1), active(), "a suspect at request %d", request)
		}
	}
	require.Len(t, kept, 16)
	_, points := pointsOf(t, collect()["tensorlife.watcher.suspect.runs_out_in"])
	assert.Equal(t, map[string]int64{"tensorlife.device=host,tensorlife.forecast.memory=pool budget": 0}, points,
		"it has run out")

	for _, x := range kept {
		require.NoError(t, x.Free())
	}
	require.NoError(t, w.Tick())
	assert.Zero(t, active(), "freed: cleared at once")
	_, ok := collect()["tensorlife.watcher.suspect.runs_out_in"]
	assert.False(t, ok, "no suspect, no forecast")
	runtime.KeepAlive(p)
	runtime.KeepAlive(w)
}
