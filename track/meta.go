package track

import (
	"hash/maphash"
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
	seed  maphash.Seed
	slots [metaSlots]atomic.Pointer[Meta]
	count atomic.Int64
	mu    sync.Mutex
}

func init() { metaTable.seed = maphash.MakeSeed() }

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

// metaHash mixes one-shot string hashes and the dimensions: a streaming
// maphash.Hash costs several times as much on the allocation path.
func metaHash(kind, device, dtype string, shape []int) uint64 {
	seed := metaTable.seed
	h := maphash.String(seed, kind)
	h = (h ^ maphash.String(seed, device)) * 0x9E3779B97F4A7C15
	h = (h ^ maphash.String(seed, dtype)) * 0x9E3779B97F4A7C15
	for _, d := range shape {
		h = (h ^ uint64(d)) * 0x9E3779B97F4A7C15
	}
	return h ^ h>>31
}
