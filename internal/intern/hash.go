package intern

import (
	"math/bits"
	"math/rand/v2"
)

// Hash is the running state of the one hash function of these tables: a
// multiply-xor over 64-bit words, one multiply per word, and a mixing step
// at the end (Sum) that carries every bit of the state into the low bits
// that pick a slot. It is seeded per process.
//
// It is not a defence against chosen collisions (hash/maphash is, at a few
// times the cost on the record path); it need not be: the keys are the
// program's own call stacks, kinds, devices and shapes, and a collision
// costs a probe, or at worst a value that is not kept, never a wrong
// answer, since a table compares the key itself.
//
// A Hash is a value: each method returns the state with more input folded
// in, so a key hashes in one expression.
type Hash struct{ h uint64 }

// seed varies the slots a key lands in from one process to the next, so
// that no fixed set of keys crowds the same slots in every run.
var seed = rand.Uint64()

// NewHash returns the starting state, the process's seed.
func NewHash() Hash { return Hash{seed} }

// Word folds in one word.
func (h Hash) Word(w uint64) Hash { return Hash{(h.h ^ w) * 0x9E3779B97F4A7C15} }

// PCs folds in program counters, one word each: a call stack.
func (h Hash) PCs(pcs []uintptr) Hash {
	for _, pc := range pcs {
		h = h.Word(uint64(pc))
	}
	return h
}

// Ints folds in integers, one word each: a shape.
func (h Hash) Ints(s []int) Hash {
	for _, d := range s {
		h = h.Word(uint64(d))
	}
	return h
}

// String folds in s and its length, one word per eight bytes; the last word
// overlaps the one before it, and a string under eight bytes is read in two
// overlapping halves, as wyhash does: every byte counts, with no loop over
// single bytes. The length keeps "ab"+"c" and "a"+"bc" apart.
func (h Hash) String(s string) Hash {
	n := len(s)
	h = h.Word(uint64(n))
	switch {
	case n > 8:
		for rest := s; len(rest) > 8; rest = rest[8:] {
			h = h.Word(le64(rest))
		}
		return h.Word(le64(s[n-8:]))
	case n == 8:
		return h.Word(le64(s))
	case n >= 4:
		return h.Word(uint64(le32(s))<<32 | uint64(le32(s[n-4:])))
	case n > 0:
		return h.Word(uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1]))
	}
	return h
}

// Sum returns the hash. A multiply carries a word's bits only upward, so a
// difference in a word's top byte ends in the state's top byte; Sum folds
// the state with a full 64×64→128-bit multiply, xoring the high half onto
// the low, as wyhash does, so that keys that differ in one byte, any byte,
// land in different slots of tables of every size. On a hash that a lookup
// waits for, it costs about a nanosecond more than a final shift would;
// splitmix64's finalizer, two rounds of shift and multiply, costs four.
func (h Hash) Sum() uint64 {
	hi, lo := bits.Mul64(h.h^0xA0761D6478BD642F, 0xE7037ED1A0B428DB)
	return hi ^ lo
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}
