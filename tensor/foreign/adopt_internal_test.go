package foreign

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// The adoption state lives with what it is about: a device's live ranges
// in the device, a tracker's books in the tracker. Nothing process-wide
// holds either, so a test that makes a hundred trackers keeps nothing of
// them, and two trackers' books never meet.
func TestAdoptionStateLivesWithItsOwners(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	live := adoptionsOf(dev)
	require.NotNil(t, live, "a host device keeps its adoptions")
	for i := range 100 {
		tr, err := track.New()
		require.NoError(t, err)
		x, err := Adopt(context.Background(), tr, Memory{Device: dev, Ptr: tensor.DevicePtr(i+1) << 20, Bytes: 64,
			Release: func(tensor.DevicePtr) error { return nil }}, tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{64}})
		require.NoError(t, err)
		n, bytes := live.Held()
		assert.Equal(t, 1, n)
		assert.Equal(t, int64(64), bytes)
		sh, err := shelves.Of(tr)
		require.NoError(t, err)
		require.Len(t, sh.books, 1, "the tracker's own books")
		require.NoError(t, x.Free())
	}
	n, bytes := live.Held()
	assert.Zero(t, n, "no live adoption: the device holds no range")
	assert.Zero(t, bytes)
}
