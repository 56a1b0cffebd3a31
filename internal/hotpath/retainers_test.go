package hotpath_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/hotpath"
)

// The tests of this package turn retainer search on for their process, as
// tracktest does: EnableRetainers cannot be undone.

func TestDevicesAreNotFencedWhileOff(t *testing.T) {
	if hotpath.RetainersOn() {
		t.Skip("search already on in this process")
	}
	release := hotpath.HoldDevices()
	defer release()
	held := hotpath.EnterDevice() // does not wait: search is off
	assert.False(t, held)
	hotpath.ExitDevice(held)
}

func TestHoldDevicesWaitsForCallsAndHoldsNewOnes(t *testing.T) {
	hotpath.EnableRetainers()
	assert.True(t, hotpath.RetainersOn())

	held := hotpath.EnterDevice()
	assert.True(t, held)
	holding := make(chan func())
	go func() { holding <- hotpath.HoldDevices() }()
	select {
	case <-holding:
		t.Fatal("HoldDevices returned while a device call was in flight")
	case <-time.After(20 * time.Millisecond):
	}
	hotpath.ExitDevice(held)
	release := <-holding

	entered := make(chan bool)
	go func() { entered <- hotpath.EnterDevice() }()
	select {
	case <-entered:
		t.Fatal("a device call began while the devices were held")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	h := <-entered
	assert.True(t, h)
	hotpath.ExitDevice(h)
}

func TestHandlesWithoutALookup(t *testing.T) {
	assert.Nil(t, hotpath.Handles(nil, 1), "package tensor is not linked into this test")
}
