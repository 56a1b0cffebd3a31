package oteltrack_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/oteltrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// Registered with the tracker alone, the metrics find the pool, its device,
// the mask cache and the watcher made with it, including those made after
// the registration.
func TestRegisterWithTheTrackerAloneFindsItsParts(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	mp, collect := metricsReader(t)
	m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Stop()) }()

	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(512<<10))
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	c, err := mask.NewCache(mask.CacheTracker(tr), mask.CacheName("hub"))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	w, err := watch.New(tr)
	require.NoError(t, err)
	x, err := tensor.New(context.Background(), p, tensor.Float32, 256)
	require.NoError(t, err)
	defer func() { require.NoError(t, x.Free()) }()

	got := collect()
	for _, name := range []string{"tensorlife.pool.memory.usage", "tensorlife.pool.memory.limit",
		"tensorlife.device.memory.usage", "tensorlife.mask.cache.memory.limit", "tensorlife.watcher.windows"} {
		assert.Contains(t, got, name, "found on the tracker")
	}
	runtime.KeepAlive(w)
}
