// Package counter holds what the hot structures of tensor, pool and track
// share to count without contention: the cache-line size their counters
// are padded to, high-water marks raised in place, the process-unique
// identities allocators stamp into their blocks, and totals that saturate
// rather than wrap.
package counter

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
)

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

// AddSat returns a + b held at the int64 bounds rather than wrapping: a
// total of figures that parts report (the bytes several allocators claim
// on one device) saturates instead of turning negative.
func AddSat(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// Every sum tensorlife keeps or reads is made with this package, one of
// three ways, and none wraps:
//
//   - a sum made once, of figures read (the bytes several parts claim on one
//     device), with AddSat, held at the int64 bounds;
//   - a running sum that goes up and down (an owner's bytes, a request's in
//     flight), kept in a Sum (exact in 128 bits, read held at the bounds) under
//     its owner's lock, or in a Total, which has a lock of its own;
//   - a running sum on the record path, kept by atomic adds, which wrap: it is
//     exact modulo 2^64, and read through Live (of two cumulative sums, made
//     and freed) or Held (of one sum that cannot be negative), which read a
//     sum past MaxInt64 as MaxInt64, never as a negative. Such a sum is the
//     truth only while the truth is below 2^64, so where records of any size
//     add up (a site's bytes) the record path counts a record of 2^32 bytes
//     or more in a Sum under a lock instead, and keeps the atomic sum for
//     smaller ones, which would need 2^32 of them live to pass 2^64; a reader
//     adds the two parts in a Sum (AddSum, AddUint) and a count of records
//     of one size is read as bytes with AddMul, which cannot wrap either.
//
// A figure that cannot be negative is never shown negative.

// Sum is a sum of int64 figures kept exactly past the int64 range (in 128
// bits), read held at the int64 bounds (Load): adding and then removing
// figures that together pass math.MaxInt64 leaves it exact, where a
// saturating int64 would not come back down. The zero value is 0. It is
// not safe for concurrent use: it is kept under its owner's lock, or made
// by one reader.
type Sum struct {
	hi int64  // the high word of a two's-complement 128-bit sum
	lo uint64 // its low word
}

// Add adds n.
func (s *Sum) Add(n int64) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, uint64(n), 0)
	s.hi += n>>63 + int64(carry) // n's sign extended into the high word
}

// AddUint adds n, a figure in [0, 2^64): a running sum read as unsigned.
func (s *Sum) AddUint(n uint64) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, n, 0)
	s.hi += int64(carry)
}

// AddSum adds o.
func (s *Sum) AddSum(o Sum) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, o.lo, 0)
	s.hi += o.hi + int64(carry)
}

// SubSum subtracts o.
func (s *Sum) SubSum(o Sum) {
	var borrow uint64
	s.lo, borrow = bits.Sub64(s.lo, o.lo, 0)
	s.hi -= o.hi + int64(borrow)
}

// AddMul adds n × size, exactly for any n and size of int64 (the product
// of two int64 fits in 127 bits): a count of records of one size, read as
// bytes, with no product that wraps.
func (s *Sum) AddMul(n, size int64) {
	neg := (n < 0) != (size < 0)
	hi, lo := bits.Mul64(abs(n), abs(size))
	if neg { // two's complement of the 128-bit product
		lo = ^lo + 1
		hi = ^hi
		if lo == 0 {
			hi++
		}
	}
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, lo, 0)
	s.hi += int64(hi) + int64(carry)
}

// abs returns |n| as a uint64, exact for math.MinInt64 too.
func abs(n int64) uint64 {
	if n < 0 {
		return uint64(-n) // -MinInt64 wraps to itself, whose uint64 is 2^63
	}
	return uint64(n)
}

// Load returns the sum, held at math.MaxInt64 and math.MinInt64.
func (s Sum) Load() int64 {
	switch {
	case s.hi > 0 || (s.hi == 0 && s.lo > math.MaxInt64):
		return math.MaxInt64
	case s.hi < -1 || (s.hi == -1 && s.lo < 1<<63):
		return math.MinInt64
	}
	return int64(s.lo)
}

// Live returns made - freed, two cumulative sums of non-negative figures
// kept by atomic adds (each exact modulo 2^64, freed read first), as a
// figure in [0, MaxInt64]: the live bytes of a site or a tracker. Their
// difference is exact modulo 2^64 whatever each sum wrapped, so it is the
// truth while the truth is below 2^64, read as MaxInt64 past MaxInt64.
func Live(made, freed int64) int64 { return Held(int64(uint64(made) - uint64(freed))) }

// Held returns v, a running sum that cannot be negative kept by atomic
// adds (exact modulo 2^64), as a figure in [0, MaxInt64]: a negative
// reading is a sum that passed MaxInt64, and reads MaxInt64.
func Held(v int64) int64 {
	if v < 0 {
		return math.MaxInt64
	}
	return v
}

// Total is a Sum with a lock of its own, for totals off the hot path (the
// memory adopted on a device). The zero value is 0; it must not be copied
// after first use. Safe for concurrent use.
type Total struct {
	mu  sync.Mutex
	sum Sum
}

// Add adds n and returns the sum, saturated (Load).
func (t *Total) Add(n int64) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sum.Add(n)
	return t.sum.Load()
}

// Load returns the sum, held at math.MaxInt64 and math.MinInt64.
func (t *Total) Load() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sum.Load()
}
