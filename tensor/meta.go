package tensor

import (
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/tensorlife/tensorlife/track"
)

// metaHints is a small direct-mapped cache in front of track.InternMeta,
// keyed by identity rather than content: the addresses of the kind and
// device strings, the dtype and the dimensions. A program passes the same
// few string constants on every allocation, so hashing their addresses
// finds the Meta without reading the strings; the entry is then checked
// against the content, so a string with equal content at another address
// costs a trip to InternMeta, never a wrong Meta. It halves the cost of
// the metadata on the allocation path.
var metaHints [metaHintSlots]atomic.Pointer[track.Meta]

const metaHintSlots = 1 << 8

// internMeta returns the shared Meta of a tensor.
func internMeta(kind, device string, dt DType, shape Shape) *track.Meta {
	h := uint64(uintptr(unsafe.Pointer(unsafe.StringData(kind))))*0x9E3779B97F4A7C15 ^
		uint64(uintptr(unsafe.Pointer(unsafe.StringData(device)))) ^ uint64(dt)<<56
	for _, d := range shape {
		h = (h ^ uint64(d)) * 0xBF58476D1CE4E5B9
	}
	slot := &metaHints[(h^h>>32)%metaHintSlots]
	name := dt.String()
	if m := slot.Load(); m != nil && m.Kind == kind && m.Device == device && m.DType == name && slices.Equal(m.Shape, shape) {
		return m
	}
	m := track.InternMeta(kind, device, name, shape)
	slot.Store(m)
	return m
}
