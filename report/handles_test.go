package report

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

//go:noinline
func summaryForgetsACacheHit(ctx context.Context, c *mask.Cache, b *mask.Builder) (*tensor.Tensor, error) {
	return c.GetOrBuild(ctx, "prompt", func(ctx context.Context) (*tensor.Tensor, error) { return b.Causal(ctx, 32) })
}

// The summary lists a handle that outlived its request as what it is, with
// the line that took it.
func TestSummaryNamesAHandleThatOutlivedItsRequest(t *testing.T) {
	tr, err := track.New(track.Name("handles"))
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(16 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr))
	require.NoError(t, err)
	b, err := mask.NewBuilder(p)
	require.NoError(t, err)
	c, err := mask.NewCache(mask.CacheTracker(tr))
	require.NoError(t, err)
	w, err := watch.New(tr, watch.OnSuspect(func(watch.Suspect) {}))
	require.NoError(t, err)
	var held []*tensor.Tensor
	for range 2 { // a miss, then a hit: both handles forgotten
		ctx, end := track.WithRequest(context.Background())
		m, err := summaryForgetsACacheHit(ctx, c, b)
		require.NoError(t, err)
		held = append(held, m)
		end()
		require.NoError(t, w.Tick())
	}
	var buf bytes.Buffer
	require.NoError(t, WriteSummary(&buf, tr))
	out := buf.String()
	assertFits(t, out)
	t.Log(out[strings.Index(out, "\nLeak suspects"):])
	flat := strings.Join(strings.Fields(out), " ")
	assert.Contains(t, flat, "held")
	assert.Contains(t, flat, "summaryForgetsACacheHit (handles_test.go:")
	assert.Contains(t, flat, "1 handle taken here under a request outlived it: still held after it ended")
	assert.Contains(t, flat, "for a handle: free the handle on the path named")
	for _, m := range held {
		require.NoError(t, m.Free())
	}
	require.NoError(t, c.Close())
}
