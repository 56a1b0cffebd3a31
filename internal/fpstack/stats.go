package fpstack

import (
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// EnvVar names the environment variable that operators set to "callers" to
// turn frame-pointer capture off for the whole process. It is read once,
// when the package is initialized; any other value leaves capture on.
const EnvVar = "TENSORLIFE_STACK"

// disabled is the process switch; the zero value means frame-pointer capture
// is on.
var disabled atomic.Bool

func init() {
	disabled.Store(os.Getenv(EnvVar) == "callers")
}

// Enabled reports whether Walk may read frame pointers in this process. It
// is false when EnvVar was "callers" at start-up or after SetEnabled(false),
// and always false where frame pointers are unsupported (architectures
// other than amd64 and arm64). Safe for concurrent use.
func Enabled() bool { return supported && !disabled.Load() }

// SetEnabled turns frame-pointer capture on or off for the whole process
// and returns the previous setting; off, Walk refuses and Capture uses
// runtime.Callers. It overrides EnvVar. A tracker option that selects
// runtime.Callers for one tracker should not call it: it should skip Walk.
// Safe for concurrent use; walks already running finish as they started.
func SetEnabled(on bool) (was bool) {
	return !disabled.Swap(!on)
}

// Supported reports whether this architecture keeps a frame-pointer chain
// that Walk can follow (amd64 and arm64).
func Supported() bool { return supported }

// Counters are the package's counters since the process started. They only
// grow; subtract two readings for an interval.
type Counters struct {
	// Walks counts frame-pointer walks started (Walk calls that were
	// enabled, and Capture calls through them).
	Walks uint64
	// Refused counts walks that a guard stopped: the chain was not strictly
	// increasing, misaligned, took a step over MaxFrameBytes, held a zero
	// return address or went past MaxFrames.
	Refused uint64
	// Faults counts walks that faulted reading the chain and were recovered.
	Faults uint64
	// Fallbacks counts Capture calls served by runtime.Callers: capture
	// disabled or unsupported, or the walk refused or faulted.
	Fallbacks uint64
}

// Stats returns the package's counters. Safe for concurrent use; the fields are
// read one by one, so a reading taken during walks may be off by the walks
// in flight.
func Stats() Counters {
	return Counters{
		Walks:     stats.walks.load(),
		Refused:   stats.refused.Load(),
		Faults:    stats.faults.Load(),
		Fallbacks: stats.fallbacks.Load(),
	}
}

var stats struct {
	walks     stripedCounter
	refused   atomic.Uint64
	faults    atomic.Uint64
	fallbacks atomic.Uint64
}

// stripedCounter is a counter on the hot path: one atomic word per stripe,
// each on its own cache line, chosen by the caller's stack address, so that
// goroutines walking at once on different cores mostly touch different
// lines. A single shared word would bounce between cores on every walk and
// cost more than the walk itself. Refusals and faults are rare and use
// plain atomics.
type stripedCounter struct {
	stripes [counterStripes]struct {
		n atomic.Uint64
		_ [counter.CacheLine - unsafe.Sizeof(atomic.Uint64{})]byte
	}
}

// counterStripes is a power of two, more than the cores that walk at once
// on most hosts; 16 stripes cost 1 KiB.
const counterStripes = 16

func (c *stripedCounter) add(hint uintptr) {
	// Goroutine stacks are at least 2 KiB apart; a Fibonacci hash of the
	// address spreads neighbouring stacks over the stripes.
	i := (uint64(hint>>10) * 0x9E3779B97F4A7C15) >> 60
	c.stripes[i%counterStripes].n.Add(1)
}

func (c *stripedCounter) load() uint64 {
	var sum uint64
	for i := range c.stripes {
		sum += c.stripes[i].n.Load()
	}
	return sum
}
