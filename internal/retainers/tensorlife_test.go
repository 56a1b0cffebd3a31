package retainers

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/heapfence"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// tensorlife's own references are no path to a handle: the tracker's
// registry holds records, which never point at a handle, and package
// tensor's registry of handles holds them weakly. A handle that only the
// search itself pins has no path from any root, though its tracker, its
// allocator and both registries are reachable from package variables.
func TestTensorlifeHoldsNoPathToAHandle(t *testing.T) {
	heapfence.EnableRetainers() // the handle is registered, as under TENSORLIFE_RETAINERS=1
	tr, err := track.New(track.Name("own"))
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	trackers = append(trackers, tr) // reachable from a root, as a service's tracker is

	res, id, err := findUnheldHandle(alloc)
	require.NoError(t, err)
	assert.False(t, res.Found[0], "a path from tensorlife's own state: %v", res.Paths[0])
	assert.Empty(t, tr.Books().LiveHandles(id), "the handle was freed after the search")
}

var trackers []*track.Tracker

// findUnheldHandle makes a tensor that nothing but this frame holds, looks
// it up as tracktest does (through the registry) and searches for it.
//
//go:noinline
func findUnheldHandle(alloc tensor.Allocator) (*Result, uint64, error) {
	x, err := tensor.New(context.Background(), alloc, tensor.Float32, 4)
	if err != nil {
		return nil, 0, err
	}
	id := x.ID()
	hs := alloc.Tracker().Books().LiveHandles(id)
	if len(hs) != 1 {
		return nil, id, fmt.Errorf("the registry returned %d handles, not 1", len(hs))
	}
	res, err := find(hs, Config{})
	_ = x.Free()
	return res, id, err
}
