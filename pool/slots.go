package pool

import (
	"sync/atomic"
	"unsafe"

	"github.com/tensorlife/tensorlife/tensor"
)

// A Block's Tag is the pool's identity in the high 32 bits and, in the low
// 32, the index of the block's slot (24 bits) and the low 8 bits of the
// slot's generation when the block was handed out (8 bits).
//
// A slot belongs to one size class for life, and to one shard at a time
// (its home: see shard.go); all its fields but the home are read and
// written under the lock of its class in its home shard, which the hit
// path and Release take anyway: checking a release costs a few plain compares,
// no extra atomic operation. Release refuses a block whose slot is not
// handed out (a double release), whose pointer or size differ from the
// slot's (forged), or whose generation is not the slot's (a stale copy of
// a block handed out again since; the generation advances on each release,
// and 8 bits of it are compared, so a stale copy is missed only after a
// multiple of 256 releases of that block).
const (
	genBits   = 8
	genMask   = 1<<genBits - 1
	slotBits  = 32 - genBits
	maxSlots  = 1 << slotBits // device blocks live at once, per pool
	chunkBits = 8             // 256 slots, 16 KiB per chunk
	chunkSize = 1 << chunkBits
)

// slot describes one device block the pool holds, or held: a slot whose
// block went back to the device waits on its class's empty list.
type slot struct {
	// home is the slot's shard and size class (home()), set under the
	// lock of its class in its old home when a sibling takes it, and
	// under the new home's when the slot is made; 0 means not made yet.
	// Release reads it without a lock to find the lock that guards the
	// rest.
	home atomic.Uint32

	// Under the lock of the home's class.
	out  bool             // handed out
	gen  uint32           // releases of this slot's blocks, ever
	ptr  tensor.DevicePtr // 0 while the slot holds no block
	size int64
	// adm is the admission the block was drawn under and drawn the bytes
	// of its reservation it took (admit.go); nil and 0 for others.
	adm   *Admission
	drawn int64

	// Every hit and release writes its slot: one cache line per slot keeps
	// goroutines working on different blocks from invalidating each
	// other's lines. 64 bytes of host memory per device block.
	_ [64 - 48]byte
}

type chunk [chunkSize]slot

// A slot fills one 64-byte line exactly: this fails to compile otherwise.
var _ = [1]struct{}{}[unsafe.Sizeof(slot{})-64]

// slotTable maps slot indices to slots with two loads and no lock: a
// copy-on-grow directory of fixed chunks, so a slot never moves once made.
// New indices are handed out under Pool.mu, on the miss path only, when
// the class has no empty slot to reuse.
type slotTable struct {
	dir  atomic.Pointer[[]*chunk]
	next uint32 // indices below next exist; under Pool.mu
}

// get returns slot i, or nil if its chunk was never made.
func (t *slotTable) get(i uint32) *slot {
	d := t.dir.Load()
	if d == nil || int(i>>chunkBits) >= len(*d) {
		return nil
	}
	return &(*d)[i>>chunkBits][i&(chunkSize-1)]
}

// add returns a new slot index; ok is false when maxSlots exist. The caller
// holds Pool.mu.
func (t *slotTable) add() (uint32, bool) {
	if t.next >= maxSlots {
		return 0, false
	}
	i := t.next
	if i&(chunkSize-1) == 0 {
		var old []*chunk
		if d := t.dir.Load(); d != nil {
			old = *d
		}
		grown := append(old[:len(old):len(old)], new(chunk))
		t.dir.Store(&grown)
	}
	t.next++
	return i, true
}

// handOut marks slot s (index i) handed out and returns its block. The
// caller holds the class lock.
func (s *slot) handOut(id, i uint32) tensor.Block {
	s.out = true
	return tensor.Block{Ptr: s.ptr, Size: s.size, Tag: uint64(id)<<32 | uint64(i<<genBits|s.gen&genMask)}
}
