package track

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
)

// Meta is what an allocation holds, apart from its size: its kind, device,
// element type and shape. A Meta is immutable and shared by every record
// that holds the same thing, so that a live record costs a pointer rather
// than three strings and a slice (the 256 B per live tensor budget of
// docs/ARCHITECTURE.md): get one from InternMeta. It must not be modified
// once a record points at it.
type Meta struct {
	Kind   string // what it is for: "tensor", "mask", "kv-cache", ...
	Device string // device name, "cuda:0"
	DType  string // element type name
	Shape  []int  // dimensions
}

// emptyMeta stands for a record made without a Meta.
var emptyMeta = &Meta{}

// metaOf returns r's Meta, never nil.
func metaOf(r *Record) *Meta {
	if r.Meta == nil {
		return emptyMeta
	}
	return r.Meta
}

// metaSlots bounds the Metas InternMeta keeps: distinct (kind, device,
// dtype, shape) values a process allocates are few, but a shape that varies
// per request (a sequence length) could make them many. Past the bound,
// InternMeta returns a fresh Meta that is not kept: memory per record grows
// by one Meta, and nothing else changes.
const metaSlots = 1 << 14

// metaTable is a fixed open-addressed table: lookups take no lock, inserts
// (once per distinct value) take one. It never grows, so it never moves a
// slot that a lookup is reading.
var metaTable struct {
	seed  uint64
	slots [metaSlots]atomic.Pointer[Meta]
	count atomic.Int64
	mu    sync.Mutex
}

func init() { metaTable.seed = rand.Uint64() }

// maxProbe bounds a lookup's probes, so that a full region of the table
// costs a few compares, not a scan.
const maxProbe = 8

// InternMeta returns the shared Meta for kind, device, dtype and shape. It
// copies shape only when it keeps a new Meta, so the caller may reuse it.
// It is safe for concurrent use and, for a value seen before, allocates
// nothing.
func InternMeta(kind, device, dtype string, shape []int) *Meta {
	h := metaHash(kind, device, dtype, shape)
	for i := range maxProbe {
		m := metaTable.slots[(h+uint64(i))%metaSlots].Load()
		if m == nil {
			break
		}
		if m.Kind == kind && m.Device == device && m.DType == dtype && slices.Equal(m.Shape, shape) {
			return m
		}
	}
	m := &Meta{Kind: kind, Device: device, DType: dtype, Shape: slices.Clone(shape)}
	if metaTable.count.Load() >= metaSlots*3/4 {
		return m // full enough that probes would grow long: not kept
	}
	metaTable.mu.Lock()
	defer metaTable.mu.Unlock()
	for i := range maxProbe {
		slot := &metaTable.slots[(h+uint64(i))%metaSlots]
		old := slot.Load()
		if old == nil {
			slot.Store(m)
			metaTable.count.Add(1)
			return m
		}
		if old.Kind == kind && old.Device == device && old.DType == dtype && slices.Equal(old.Shape, shape) {
			return old
		}
	}
	return m
}

// metaHash mixes the strings and the dimensions with a multiply-xorshift
// over eight bytes at a time, seeded per process. It is not a defence
// against chosen collisions (maphash is, at three times the cost on the
// allocation path); it need not be: kinds, devices and dtypes are the
// program's own few values, and a collision costs a probe, or at worst a
// Meta that is not shared, never a wrong answer.
func metaHash(kind, device, dtype string, shape []int) uint64 {
	h := metaTable.seed
	h = mixString(h, kind)
	h = mixString(h, device)
	h = mixString(h, dtype)
	for _, d := range shape {
		h = mix(h, uint64(d))
	}
	return h ^ h>>31
}

func mix(h, w uint64) uint64 {
	h = (h ^ w) * 0x9E3779B97F4A7C15
	return h ^ h>>29
}

// mixString folds s, and its length, into h, one word per eight bytes;
// the last word overlaps the one before it, and a string under eight bytes
// is read in two overlapping halves, as wyhash does: every byte counts,
// with no loop over single bytes.
func mixString(h uint64, s string) uint64 {
	n := len(s)
	h = mix(h, uint64(n))
	switch {
	case n > 8:
		for rest := s; len(rest) > 8; rest = rest[8:] {
			h = mix(h, le64(rest))
		}
		return mix(h, le64(s[n-8:]))
	case n == 8:
		return mix(h, le64(s))
	case n >= 4:
		return mix(h, uint64(le32(s))<<32|uint64(le32(s[n-4:])))
	case n > 0:
		return mix(h, uint64(s[0])<<16|uint64(s[n>>1])<<8|uint64(s[n-1]))
	}
	return h
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
