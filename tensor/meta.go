package tensor

import (
	"math"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/intern"
	"github.com/tensorlife/tensorlife/track"
)

// metaHints is a small intern table in front of track.InternMeta, keyed by
// identity rather than content: the kind and device strings by their
// addresses and lengths, the dtype and the dimensions. A program passes
// the same few string constants on every allocation, so the identity finds
// the Meta without reading the strings. Each hint holds its key in its own
// 64 bytes, one cache line, which is all a lookup reads: the Meta, its
// strings and its shape are not touched. A hint holds the strings it names
// (their data pointers are kept, not their addresses as numbers), so no
// other string can take their place while it lives: two strings with one
// address and one length are the same bytes, as Go strings are immutable.
// A string with equal content at another address is another key, which
// finds the same Meta through InternMeta, never a wrong one. It takes the
// metadata off the allocation path's costs but for a hash and one line.
//
// Each identity is kept once, up to half the slots; past them, a new one
// is not kept and every allocation with it asks InternMeta, which is what
// a hint that misses costs. So does a shape of more than metaHintDims
// dimensions or a dimension past int32, a kind or device past 2^32-1
// bytes. Four probes bound a lookup.
var metaHints = intern.New[metaHint](intern.Limits{Slots: metaHintSlots, Values: metaHintSlots / 2, Probes: 4})

const (
	metaHintSlots = 1 << 12
	metaHintDims  = 6
)

// metaHint is one key of metaHints and its Meta.
type metaHint struct {
	kind, device *byte // the strings' data
	klen, dlen   uint32
	dt           DType
	ndim         uint8
	dims         [metaHintDims]int32
	meta         *track.Meta
}

// A hint fills one 64-byte line: this fails to compile otherwise.
var _ = [1]struct{}{}[unsafe.Sizeof(metaHint{})-64]

// same reports whether h is the hint of this key. shape has at most
// metaHintDims dimensions, each within int32.
func (h *metaHint) same(kind, device string, dt DType, shape Shape) bool {
	if h.kind != unsafe.StringData(kind) || h.device != unsafe.StringData(device) ||
		h.klen != uint32(len(kind)) || h.dlen != uint32(len(device)) || h.dt != dt || int(h.ndim) != len(shape) {
		return false
	}
	for i, d := range shape {
		if h.dims[i] != int32(d) {
			return false
		}
	}
	return true
}

// internMeta returns the shared Meta of a tensor.
func internMeta(kind, device string, dt DType, shape Shape) *track.Meta {
	if len(shape) > metaHintDims || uint64(len(kind)) > math.MaxUint32 || uint64(len(device)) > math.MaxUint32 {
		return track.InternMeta(kind, device, dt.String(), shape)
	}
	hash := intern.NewHash().
		Word(uint64(uintptr(unsafe.Pointer(unsafe.StringData(kind))))).
		Word(uint64(uintptr(unsafe.Pointer(unsafe.StringData(device))))).
		Word(uint64(len(kind))<<32 | uint64(len(device))<<8 | uint64(dt))
	for _, d := range shape {
		if d != int(int32(d)) { // not a hint's
			return track.InternMeta(kind, device, dt.String(), shape)
		}
		hash = hash.Word(uint64(d))
	}
	h := hash.Sum()
	same := func(m *metaHint) bool { return m.same(kind, device, dt, shape) }
	if m, ok := metaHints.Lookup(h, same); ok {
		return m.meta
	}
	m := track.InternMeta(kind, device, dt.String(), shape)
	metaHints.Insert(h, same, func(int) *metaHint {
		hint := &metaHint{
			kind: unsafe.StringData(kind), device: unsafe.StringData(device),
			klen: uint32(len(kind)), dlen: uint32(len(device)),
			dt: dt, ndim: uint8(len(shape)), meta: m,
		}
		for i, d := range shape {
			hint.dims[i] = int32(d)
		}
		return hint
	})
	return m
}
