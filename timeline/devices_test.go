package timeline_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/timeline"
	"github.com/tensorlife/tensorlife/track"
)

// allocOn makes the test's tensors, all at this one line, on alloc.
//
//go:noinline
func allocOn(t *testing.T, alloc tensor.Allocator, n int) *tensor.Tensor {
	x, err := tensor.New(context.Background(), alloc, tensor.Float32, n)
	require.NoError(t, err)
	return x
}

// Two host devices, one line allocating on both: the timeline draws one
// series per device, named after it, each with its own bytes; the trace
// names the device in its counters.
func TestSeriesSplitByDevice(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1024))
	var allocs []tensor.Allocator
	for _, name := range []string{"host:0", "host:1"} {
		dev, err := tensor.NewHostDevice(1<<20, tensor.DeviceName(name))
		require.NoError(t, err)
		a, err := tensor.NewDeviceAllocator(dev, tr)
		require.NoError(t, err)
		allocs = append(allocs, a)
	}
	var kept []*tensor.Tensor
	for i := range 6 {
		// host:0 gets 1 KiB a step, host:1 4 KiB every other step.
		kept = append(kept, allocOn(t, allocs[0], 256))
		if i%2 == 0 {
			kept = append(kept, allocOn(t, allocs[1], 1024))
		}
	}

	tl, err := timeline.Build(tr)
	require.NoError(t, err)
	require.Len(t, tl.Series, 2, "one line, two devices: two series")
	byDevice := map[string]timeline.Series{}
	for _, s := range tl.Series {
		byDevice[s.Device] = s
		assert.True(t, strings.HasSuffix(s.Name, " @"+s.Device), "the name says the device: %q", s.Name)
		assert.True(t, strings.HasSuffix(s.Function, ".allocOn"), s.Function)
	}
	require.Contains(t, byDevice, "host:0")
	require.Contains(t, byDevice, "host:1")
	assert.Equal(t, int64(6<<10), byDevice["host:0"].Peak)
	assert.Equal(t, int64(12<<10), byDevice["host:1"].Peak)
	last := len(tl.Times) - 1
	assert.Equal(t, int64(6<<10), byDevice["host:0"].Values[last])
	assert.Equal(t, int64(12<<10), byDevice["host:1"].Values[last])
	assert.Equal(t, int64(18<<10), tl.Total[last])

	svg, trace := string(writeSVG(t, tl)), string(writeTrace(t, tl))
	for _, dev := range []string{"host:0", "host:1"} {
		assert.Contains(t, svg, "@"+dev, "the legend says the device")
		assert.Contains(t, trace, "@"+dev, "the trace's counters say the device")
	}
	for _, x := range kept {
		require.NoError(t, x.Free())
	}
}

// One device keeps today's look: series by line, no device in the name.
func TestOneDeviceSeriesHaveNoDevice(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1024))
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	a, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	x := allocOn(t, a, 256)
	tl, err := timeline.Build(tr)
	require.NoError(t, err)
	require.Len(t, tl.Series, 1)
	assert.Empty(t, tl.Series[0].Device)
	assert.NotContains(t, tl.Series[0].Name, "@")
	require.NoError(t, x.Free())
}
