package tensor

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// The process-wide adoption state is keyed by objects and dies with them:
// a device's live ranges go with its last adoption, a tracker's books with
// the tracker, so a test that makes a thousand trackers stays flat.
func TestAdoptionStateDiesWithItsKeys(t *testing.T) {
	dev, err := NewHostDevice(1 << 20)
	require.NoError(t, err)
	trackers := func() int {
		adoptedBooksOf.mu.Lock()
		defer adoptedBooksOf.mu.Unlock()
		return len(adoptedBooksOf.trackers)
	}
	before := trackers()
	for i := range 100 {
		tr, err := track.New()
		require.NoError(t, err)
		x, err := Adopt(context.Background(), tr, ForeignMemory{Device: dev, Ptr: DevicePtr(i+1) << 20, Bytes: 64,
			Release: func(DevicePtr) error { return nil }}, Spec{DType: Uint8, Shape: Shape{64}})
		require.NoError(t, err)
		require.NoError(t, x.Free())
	}
	liveAdoptions.mu.Lock()
	_, held := liveAdoptions.devices[dev]
	liveAdoptions.mu.Unlock()
	assert.False(t, held, "no live adoption: nothing kept for the device")
	require.Eventually(t, func() bool {
		runtime.GC()
		return trackers() <= before
	}, 5*time.Second, 10*time.Millisecond, "the books went with their trackers")
}
