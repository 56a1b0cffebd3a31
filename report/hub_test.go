package report_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// The tracker is the hub: a summary of it alone shows the pool, the
// device, the mask cache and the watcher made with it.
func TestSummaryOfTheTrackerAloneShowsItsParts(t *testing.T) {
	tr, err := track.New(track.Name("hub"))
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(1<<20, tensor.DeviceName("hubdev"))
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr))
	require.NoError(t, err)
	w, err := watch.New(tr)
	require.NoError(t, err)
	c, err := mask.NewCache(mask.CacheName("hub-masks"))
	require.NoError(t, err)
	x, err := tensor.New(context.Background(), p, tensor.Float32, 256)
	require.NoError(t, err)
	require.NoError(t, c.Put("prompt", x))
	require.NoError(t, x.Free())

	var b bytes.Buffer
	require.NoError(t, report.WriteSummary(&b, tr))
	out := b.String()
	assert.Contains(t, out, "\nPools\n")
	assert.Regexp(t, `(?m)^  hubdev +\d`, out, "the pool's row and the device's")
	assert.Contains(t, out, "\nDevices (")
	assert.Contains(t, out, "hub-masks")
	assert.Contains(t, out, "\nLeak suspects (")

	r := report.Sources{}.Read(tr)
	require.Len(t, r.Pools, 1)
	require.Len(t, r.Devices, 1, "the pool's device, once")
	assert.Equal(t, "hubdev", r.Devices[0].Device)
	assert.Equal(t, r.Pools[0].Reserved, r.Devices[0].Reserved)
	require.Len(t, r.Caches, 1)
	require.Len(t, r.Watchers, 1)
	assert.Equal(t, w.Rules(), r.Watchers[0].Rules)
	assert.Equal(t, w.WindowsEnded(), r.Watchers[0].WindowsEnded)

	// Closed parts leave the summary at once.
	require.NoError(t, c.Close())
	require.NoError(t, p.Close())
	r = report.Sources{}.Read(tr)
	assert.Empty(t, r.Caches)
	assert.Empty(t, r.Pools)
	runtime.KeepAlive(w)
}

// A pool the tracker no longer reaches leaves its books: the tracker holds
// its parts weakly and keeps nothing alive.
func TestDroppedPoolLeavesTheTracker(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	func() {
		_, err := pool.New(dev, pool.Tracker(tr))
		require.NoError(t, err)
	}()
	for range 3 { // a weak pointer is cleared once the pool is collected
		runtime.GC()
	}
	assert.Empty(t, report.Sources{}.Read(tr).Pools)
}

// A cache made with CacheTracker is in the summary before it keeps a mask;
// a nil tracker there is an error of both kinds.
func TestCacheTrackerAttachesAtOnce(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	c, err := mask.NewCache(mask.CacheTracker(tr), mask.CacheName("early"))
	require.NoError(t, err)
	r := report.Sources{}.Read(tr)
	require.Len(t, r.Caches, 1)
	assert.Equal(t, "early", r.Caches[0].Name)
	require.NoError(t, c.Close())
	assert.Empty(t, report.Sources{}.Read(tr).Caches, "a closed cache leaves")

	_, err = mask.NewCache(mask.CacheTracker(nil))
	assert.ErrorIs(t, err, mask.ErrInvalidOption)
	assert.ErrorIs(t, err, track.ErrNilTracker)
}
