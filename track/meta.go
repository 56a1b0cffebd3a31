package track

import (
	"slices"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/internal/intern"
)

// Meta is an allocation's kind, device, dtype and shape, shared (InternMeta).
type Meta struct {
	Kind   string // "tensor", "mask", "kv-cache", ...
	Device string // "cuda:0"
	DType  string
	Shape  []int
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

// metaTable is a fixed intern table: lookups take no lock, inserts (once
// per distinct value) take one. It stops keeping Metas at three quarters
// full, and a lookup tries at most maxProbe slots, so that a crowded region
// of the table costs a few compares, not a scan; a value refused for
// either reason gets a Meta that is not kept.
var metaTable = intern.New[Meta](intern.Limits{Slots: metaSlots, Values: metaSlots * 3 / 4, Probes: maxProbe})

// maxProbe bounds a lookup's probes.
const maxProbe = 8

// MaxMetaText bounds a Meta's kind, device and dtype: each is cut to
// valid UTF-8 of at most this many bytes (format.Text), since each is a
// profile's label and a metric attribute, and the device name comes from a
// part's method.
const MaxMetaText = 256

// InternMeta returns the shared Meta of these values, each text cut to
// MaxMetaText.
func InternMeta(kind, device, dtype string, shape []int) *Meta {
	kind, _ = format.Text(kind, MaxMetaText)
	device, _ = format.Text(device, MaxMetaText)
	dtype, _ = format.Text(dtype, MaxMetaText)
	h := intern.NewHash().String(kind).String(device).String(dtype).Ints(shape).Sum()
	same := func(m *Meta) bool {
		return m.Kind == kind && m.Device == device && m.DType == dtype && slices.Equal(m.Shape, shape)
	}
	if m, ok := metaTable.Lookup(h, same); ok {
		return m
	}
	fresh := func(int) *Meta { return &Meta{Kind: kind, Device: device, DType: dtype, Shape: slices.Clone(shape)} }
	if m, ok := metaTable.Insert(h, same, fresh); ok {
		return m
	}
	return fresh(0) // not kept
}
