package cuda

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/heapfence"
)

// While a heap dump holds the devices (retainer search in a test), no call
// reaches the driver: a goroutine leaving a cgo call during the dump could
// crash the process. This turns retainer search on for the rest of this
// package's tests, which then pass the fence on every call.
func TestDriverCallsWaitWhileADumpHoldsTheDevices(t *testing.T) {
	heapfence.EnableRetainers()
	d, _ := openFake(t, 1<<20)
	p, err := d.Alloc(64)
	require.NoError(t, err)

	release := heapfence.HoldDevices()
	done := make(chan error, 1)
	go func() { done <- d.Free(p, 64) }()
	select {
	case err := <-done:
		release()
		t.Fatalf("Free reached the driver while the devices were held (err %v)", err)
	case <-time.After(20 * time.Millisecond):
	}
	blocks, _ := d.Outstanding()
	assert.Equal(t, 1, blocks, "the held call has not begun")
	release()
	require.NoError(t, <-done)
	blocks, _ = d.Outstanding()
	assert.Zero(t, blocks)
}
