package watch_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// keepViewOfStep makes a step's tensor, keeps a View of it and frees the
// tensor: the View's line is what holds the memory.
//
//go:noinline
func keepViewOfStep(t *testing.T, alloc tensor.Allocator) *tensor.Tensor {
	x, err := tensor.New(context.Background(), alloc, tensor.Float32, 1024)
	require.NoError(t, err)
	v, err := x.View(0, 256) // the line a suspect must name
	require.NoError(t, err)
	require.NoError(t, x.Free())
	return v
}

// A suspect whose memory only Views keep names the View's line.
func TestSuspectNamesTheHolder(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	w, err := watch.New(tr, watch.OnSuspect(func(watch.Suspect) {}))
	require.NoError(t, err)
	var kept []*tensor.Tensor
	for range 16 {
		kept = append(kept, keepViewOfStep(t, alloc))
		require.NoError(t, w.Tick())
	}
	suspects := w.Suspects()
	require.Len(t, suspects, 1)
	require.NotEmpty(t, suspects[0].HeldBy)
	h := suspects[0].HeldBy[0]
	assert.Equal(t, "View", h.How)
	assert.True(t, strings.HasPrefix(h.String(), "a View made at holders_test.go:"), h.String())
	assert.Positive(t, h.Live, "the Views kept when the site was flagged")
	for _, v := range kept {
		require.NoError(t, v.Free())
	}
}

// sharedLeak is one line that two callers leak through.
//
//go:noinline
func sharedLeak(t *testing.T, tr *track.Tracker) *track.Record {
	return record(t, context.Background(), tr, 4096)
}

//go:noinline
func leakFromPrefill(t *testing.T, tr *track.Tracker) *track.Record { return sharedLeak(t, tr) }

//go:noinline
func leakFromDecode(t *testing.T, tr *track.Tracker) *track.Record { return sharedLeak(t, tr) }

// Two suspects with one line are told apart in the watcher's log by the
// frame that differs, as every report tells them apart.
func TestSuspectLogTellsOneLineFromTwoCallersApart(t *testing.T) {
	var logged strings.Builder
	tr, err := track.New(track.Logger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	w, err := watch.New(tr)
	require.NoError(t, err)
	var kept []*track.Record
	for range 16 {
		kept = append(kept, leakFromPrefill(t, tr), leakFromDecode(t, tr))
		require.NoError(t, w.Tick())
	}
	require.Len(t, w.Suspects(), 2)
	out := logged.String()
	assert.Equal(t, 2, strings.Count(out, "msg=\"tensorlife: leak suspect"), out)
	assert.Contains(t, out, `via="via watch_test.leakFromPrefill (holders_test.go:`)
	assert.Contains(t, out, `via="via watch_test.leakFromDecode (holders_test.go:`)
	release(t, tr, kept...)
}
