package cuda

import (
	"bytes"
	"runtime"
	"testing"

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
	if returned, err := awaitParkedAtFence(done); returned {
		release()
		t.Fatalf("Free reached the driver while the devices were held (err %v)", err)
	}
	blocks, _ := d.Outstanding()
	assert.Equal(t, 1, blocks, "the held call has not begun")
	release()
	require.NoError(t, <-done)
	blocks, _ = d.Outstanding()
	assert.Zero(t, blocks)
}

// awaitParkedAtFence waits until a goroutine is parked on the fence's read
// lock inside heapfence.EnterDevice, as the runtime's goroutine dump shows it,
// or until the call that would have parked there returns on done (true,
// and its error). It waits on the runtime, not on a clock: between looks
// it only yields.
func awaitParkedAtFence(done <-chan error) (returned bool, err error) {
	buf := make([]byte, 1<<20)
	for {
		select {
		case err := <-done:
			return true, err
		default:
		}
		n := runtime.Stack(buf, true)
		for g := range bytes.SplitSeq(buf[:n], []byte("\n\n")) {
			if bytes.Contains(g, []byte("[sync.RWMutex.RLock")) && bytes.Contains(g, []byte("heapfence.EnterDevice(")) {
				return false, nil
			}
		}
		runtime.Gosched()
	}
}
