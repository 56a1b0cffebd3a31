package tensor

import "sync/atomic"

// The line that first freed a handle is kept for misuse reports (a double
// free, a use after free name it), yet almost never read. Keeping its two
// program counters in every handle cost 16 B per live tensor, a tenth of
// the 256 B budget; instead, the distinct Free lines of a process, which
// are few, are numbered here once each, and a freed handle keeps the
// number in its state word.
//
// freeLines is a fixed open-addressed table keyed by the two program
// counters. A line's number is its slot's index plus firstFreeLine: state 0
// is a live handle, freedUnknown a handle freed at a line not kept (an
// untracked tensor's, or one past a full table). Lookups take no lock and
// inserts only a compare-and-swap; the table never grows or moves a slot.
var freeLines freeLineTable

type freeLineTable [freeLineSlots]atomic.Pointer[freeLine]

type freeLine [freeDepth]uintptr

const (
	freeLineSlots = 1 << 12
	// freeLineProbes bounds the slots a lookup tries: past them, the line
	// is not kept (freedUnknown) rather than searched for.
	freeLineProbes = 8

	freedUnknown  uint32 = 1
	firstFreeLine uint32 = 2
)

// number returns the number of the line pcs names, adding it if it
// is new and there is room; freedUnknown if there is none.
func (tab *freeLineTable) number(pcs *freeLine) uint32 {
	h := (uint64(pcs[0])*0x9E3779B97F4A7C15 ^ uint64(pcs[1])) * 0xBF58476D1CE4E5B9
	h ^= h >> 29
	for i := range uint64(freeLineProbes) {
		slot := (h + i) % freeLineSlots
		l := tab[slot].Load()
		if l == nil {
			kept := *pcs
			if !tab[slot].CompareAndSwap(nil, &kept) {
				l = tab[slot].Load() // another Free took the slot first
			} else {
				return uint32(slot) + firstFreeLine
			}
		}
		if *l == *pcs {
			return uint32(slot) + firstFreeLine
		}
	}
	return freedUnknown
}

// line returns the program counters of line number n; nil for
// freedUnknown and for a live handle's state.
func (tab *freeLineTable) line(n uint32) []uintptr {
	if n < firstFreeLine {
		return nil
	}
	l := tab[n-firstFreeLine].Load()
	if l == nil {
		return nil
	}
	pcs := l[:]
	for len(pcs) > 0 && pcs[len(pcs)-1] == 0 {
		pcs = pcs[:len(pcs)-1]
	}
	return pcs
}
