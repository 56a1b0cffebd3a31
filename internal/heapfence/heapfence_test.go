package heapfence

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The tests of this package turn retainer search on for their process, as
// tracktest does: EnableRetainers cannot be undone. They read the fence with
// TryLock and TryRLock, which answer at once, so no test waits to see that
// something does not happen.

func TestDevicesAreNotFencedWhileOff(t *testing.T) {
	if RetainersOn() {
		t.Skip("search already on in this process")
	}
	release := HoldDevices()
	defer release()
	held := EnterDevice() // does not wait: search is off
	assert.False(t, held)
	ExitDevice(held)
}

func TestHoldDevicesWaitsForCallsAndHoldsNewOnes(t *testing.T) {
	EnableRetainers()
	assert.True(t, RetainersOn())

	held := EnterDevice()
	assert.True(t, held)
	assert.False(t, fence.TryLock(), "a heap dump cannot hold the devices while a device call is in flight")
	ExitDevice(held)

	release := HoldDevices()
	assert.False(t, fence.TryRLock(), "no device call begins while the devices are held")
	release()
	h := EnterDevice()
	assert.True(t, h, "a device call begins once the devices are released")
	ExitDevice(h)
}
