// Package heapfence is where retainer search (track/tracktest's Retainers
// option) meets the packages that make tensors and call devices (tensor,
// tensor/cuda), so that neither imports the other and production binaries
// link none of the search.
//
// Retainer search is off until EnableRetainers is called (tracktest does,
// for its Retainers option and for TENSORLIFE_RETAINERS=1); it never turns
// off again in a process. While it is off, the hooks cost one atomic load:
//
//   - package tensor registers every tracked handle it makes (its own
//     registry, which track.Books.LiveHandles reads), so that a leaked
//     record's id can be resolved to the handles a heap dump must find;
//   - tensor/cuda brackets each driver call with EnterDevice and
//     ExitDevice, so that HoldDevices can keep tensorlife's cgo calls out
//     of a heap dump (a goroutine leaving a cgo call while the dump runs can
//     crash the process on Go 1.26; see internal/retainers). The fence is
//     process-wide because the heap dump is: it stops every goroutine.
package heapfence

import (
	"sync"
	"sync/atomic"
)

var retainersOn atomic.Bool

// EnableRetainers turns retainer search on for the rest of the process:
// handles made from now on are registered, device calls are fenced.
func EnableRetainers() { retainersOn.Store(true) }

// RetainersOn reports whether EnableRetainers was called. It is one atomic
// load, for hot paths.
func RetainersOn() bool { return retainersOn.Load() }

// fence is held shared by each device call made while search is on, and
// exclusively by HoldDevices.
var fence sync.RWMutex

// EnterDevice admits a device call: when search is on it waits while a
// heap dump holds the devices. It returns whether ExitDevice must release
// the fence; pass that to ExitDevice when the call returns.
func EnterDevice() (held bool) {
	if !retainersOn.Load() {
		return false
	}
	fence.RLock()
	return true
}

// ExitDevice ends a device call admitted by EnterDevice.
func ExitDevice(held bool) {
	if held {
		fence.RUnlock()
	}
}

// HoldDevices waits for the device calls admitted by EnterDevice to return
// and keeps new ones waiting (off the CPU, not in cgo) until release is
// called. Calls made before EnableRetainers are not fenced; the heap dump's own
// check for goroutines in system calls sees them.
func HoldDevices() (release func()) {
	fence.Lock()
	return fence.Unlock
}
