package tensor

import (
	"slices"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/intern"
	"github.com/tensorlife/tensorlife/track"
)

// metaHints is a small intern table in front of track.InternMeta, keyed by
// identity rather than content: the addresses of the kind and device
// strings, the dtype and the dimensions. A program passes the same few
// string constants on every allocation, so hashing their addresses finds
// the Meta without reading the strings; the entry is then checked against
// the content, so a string with equal content at another address costs a
// trip to InternMeta, never a wrong Meta. It halves the cost of the
// metadata on the allocation path.
//
// Each identity is kept once, up to half the slots; past them, a new one
// is not kept and every allocation with it asks InternMeta, which is what
// a hint that misses costs. Four probes bound a lookup.
var metaHints = intern.New[track.Meta](intern.Limits{Slots: metaHintSlots, Values: metaHintSlots / 2, Probes: 4})

const metaHintSlots = 1 << 12

// internMeta returns the shared Meta of a tensor.
func internMeta(kind, device string, dt DType, shape Shape) *track.Meta {
	h := intern.NewHash().
		Word(uint64(uintptr(unsafe.Pointer(unsafe.StringData(kind))))).
		Word(uint64(uintptr(unsafe.Pointer(unsafe.StringData(device))))).
		Word(uint64(dt)).
		Ints(shape).Sum()
	name := dt.String()
	same := func(m *track.Meta) bool {
		return m.Kind == kind && m.Device == device && m.DType == name && slices.Equal(m.Shape, shape)
	}
	if m, ok := metaHints.Lookup(h, same); ok {
		return m
	}
	m := track.InternMeta(kind, device, name, shape)
	metaHints.Insert(h, same, func(int) *track.Meta { return m })
	return m
}
