package cuda

import (
	"cmp"
	"slices"

	"github.com/tensorlife/tensorlife/tensor"
)

// span is one live allocation: size bytes starting at start.
type span struct {
	start tensor.DevicePtr
	size  int64
}

// allocTable records the allocations a Device has handed out, so that it can
// refuse a pointer it did not hand out, or a copy that runs past the end of
// its block, before the driver sees it (the driver would fault, corrupt a
// neighbouring block, or report a bare CUDA_ERROR_INVALID_VALUE).
//
// Spans are kept sorted by start, which answers both questions a Device asks
// by binary search: "is p the start of a block?" (Free) and "which block
// holds p, and how much of it is left?" (copies and memset through interior
// pointers made with DevicePtr.Add). A map would answer only the first.
// Insert and remove move the tail of the slice: O(n), a memmove of 16 bytes
// per live block, which stays well under the microseconds that cuMemAlloc and
// cuMemFree take for the few thousand blocks a caching pool holds.
//
// The zero value is empty and ready to use. It is not safe for concurrent
// use; Device guards it with its mutex.
type allocTable struct {
	spans []span
	bytes int64 // sum of span sizes
}

func compareStart(s span, p tensor.DevicePtr) int { return cmp.Compare(s.start, p) }

// insert records a block. A start that is already recorded (the driver
// reusing an address the table still holds, which cannot happen while frees
// go through the Device) replaces the old entry.
func (t *allocTable) insert(p tensor.DevicePtr, size int64) {
	i, found := slices.BinarySearchFunc(t.spans, p, compareStart)
	if found {
		t.bytes += size - t.spans[i].size
		t.spans[i].size = size
		return
	}
	t.spans = slices.Insert(t.spans, i, span{start: p, size: size})
	t.bytes += size
}

// lookup returns the size of the block starting exactly at p.
func (t *allocTable) lookup(p tensor.DevicePtr) (size int64, ok bool) {
	i, found := slices.BinarySearchFunc(t.spans, p, compareStart)
	if !found {
		return 0, false
	}
	return t.spans[i].size, true
}

// remove forgets the block starting at p and reports whether there was one.
func (t *allocTable) remove(p tensor.DevicePtr) bool {
	i, found := slices.BinarySearchFunc(t.spans, p, compareStart)
	if !found {
		return false
	}
	t.bytes -= t.spans[i].size
	t.spans = slices.Delete(t.spans, i, i+1)
	return true
}

// locate finds the block that holds p. It returns the block and the offset
// of p in it; ok is false when p lies in no block.
func (t *allocTable) locate(p tensor.DevicePtr) (s span, offset int64, ok bool) {
	// The first span starting after p; the one before it is the candidate.
	i, found := slices.BinarySearchFunc(t.spans, p, compareStart)
	if found {
		return t.spans[i], 0, true
	}
	if i == 0 {
		return span{}, 0, false
	}
	s = t.spans[i-1]
	// Compare unsigned: a distance past the block may not fit an int64.
	if d := uint64(p - s.start); d >= uint64(s.size) {
		return span{}, 0, false
	}
	return s, int64(p - s.start), true
}

// take empties the table and returns what it held.
func (t *allocTable) take() []span {
	spans := t.spans
	t.spans, t.bytes = nil, 0
	return spans
}
