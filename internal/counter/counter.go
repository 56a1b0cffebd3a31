// Package counter holds what the hot structures of tensor, pool and track
// share to count without contention: the cache-line size their counters
// are padded to, high-water marks raised in place, and the process-unique
// identities allocators stamp into their blocks.
package counter

import "sync/atomic"

// CacheLine is the cache-line size, in bytes, that padding assumes, so that
// a counter or a lock that goroutines on different cores update does not
// share a line with its neighbour (false sharing): 64, the line of the
// amd64 cores tensorlife is measured on and what the Go runtime pads to
// there (internal/cpu.CacheLinePadSize). It is one constant on every
// architecture, so a structure's layout is the same everywhere; the runtime
// pads to 128 on arm64, and a per-architecture CacheLine would be the place
// to follow it. Pad a structure to a multiple of CacheLine with
//
//	_ [counter.CacheLine - unsafe.Sizeof(data{})%counter.CacheLine]byte
//
// which adds a whole line when the data already fills lines exactly.
const CacheLine = 64

// RaisePeak lifts peak to v if v is higher: the peak bytes an allocator has
// held, raised by whichever goroutine reaches a new one. The load alone is
// the common case; goroutines raising it at once leave the highest of their
// values. Safe for concurrent use.
func RaisePeak(peak *atomic.Int64, v int64) {
	for old := peak.Load(); v > old; old = peak.Load() {
		if peak.CompareAndSwap(old, v) {
			return
		}
	}
}

var nextAllocatorID atomic.Uint32

// NewAllocatorID returns an identity no other allocator of the process has,
// for the high bits of tensor.Block.Tag, so that a block released to an
// allocator that did not hand it out is caught. Package tensor's
// DeviceAllocator and package pool draw from the same counter.
func NewAllocatorID() uint32 { return nextAllocatorID.Add(1) }
