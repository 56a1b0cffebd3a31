package retainhook_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tensorlife/tensorlife/internal/retainhook"
)

// The tests of this package turn retainer search on for their process, as
// tracktest does: Enable cannot be undone.

func TestDevicesAreNotFencedWhileOff(t *testing.T) {
	if retainhook.On() {
		t.Skip("search already on in this process")
	}
	release := retainhook.HoldDevices()
	defer release()
	held := retainhook.EnterDevice() // does not wait: search is off
	assert.False(t, held)
	retainhook.ExitDevice(held)
}

func TestHoldDevicesWaitsForCallsAndHoldsNewOnes(t *testing.T) {
	retainhook.Enable()
	assert.True(t, retainhook.On())

	held := retainhook.EnterDevice()
	assert.True(t, held)
	holding := make(chan func())
	go func() { holding <- retainhook.HoldDevices() }()
	select {
	case <-holding:
		t.Fatal("HoldDevices returned while a device call was in flight")
	case <-time.After(20 * time.Millisecond):
	}
	retainhook.ExitDevice(held)
	release := <-holding

	entered := make(chan bool)
	go func() { entered <- retainhook.EnterDevice() }()
	select {
	case <-entered:
		t.Fatal("a device call began while the devices were held")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	h := <-entered
	assert.True(t, h)
	retainhook.ExitDevice(h)
}

func TestHandlesWithoutALookup(t *testing.T) {
	assert.Nil(t, retainhook.Handles(nil, 1), "package tensor is not linked into this test")
}
