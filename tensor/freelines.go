package tensor

import (
	"runtime"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/fpstack"
)

// The line that first freed a handle is kept for misuse reports (a double
// free, a use after free name it), yet almost never read. Keeping its
// program counters in every handle would cost 32 B per live tensor, an
// eighth of the 256 B budget; instead, the distinct Free lines of a
// process, which are few, are numbered here once each, and a freed handle
// keeps the number in its state word.
//
// freeLines is a fixed open-addressed table keyed by the program counters
// Free captured: freeDepth frames and two more, as the tracker captures
// them (a frame-pointer walk or runtime.Callers). Nothing is symbolized on
// Free; a report turns a line into freeDepth frames (reportedFrames). A
// line's number is its slot's index plus firstFreeLine: state 0 is a live
// handle, freedUnknown a handle freed at a line not kept (an untracked
// tensor's, or one past a full table). Lookups take no lock and inserts
// only a compare-and-swap; the table never grows or moves a slot.
var freeLines freeLineTable

type freeLineTable [freeLineSlots]atomic.Pointer[freeLine]

// freeLine is what Free captures: two frames more than a report keeps, for
// the wrapper frames a walk sees and runtime.Callers does not, such as
// those of a deferred Free (the defer statement's closure, and
// runtime.deferreturn where the defer is not open-coded).
type freeLine [freeDepth + 2]uintptr

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
	var h uint64
	for _, pc := range pcs {
		h = (h*0x9E3779B97F4A7C15 ^ uint64(pc)) * 0xBF58476D1CE4E5B9
		h ^= h >> 29
	}
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

// reportedFrames returns the first freeDepth logical frames of a line
// captured by Free, wrapper frames (fpstack.IsWrapper) left out, as the
// program counters runtime.Callers would have given for them: a line reads
// the same whether Free's capture walked frame pointers or called
// runtime.Callers, and a deferred Free names the function that deferred it
// and its caller. It symbolizes, so it runs when a report needs the line,
// never on Free. A line none of whose frames symbolizes is returned as it
// is, cut to freeDepth.
func reportedFrames(pcs []uintptr) []uintptr {
	kept := make([]uintptr, 0, freeDepth)
	frames := runtime.CallersFrames(pcs)
	for len(kept) < freeDepth {
		f, more := frames.Next()
		if f.PC != 0 && !fpstack.IsWrapper(f) {
			// Frames backs each PC up into its call; runtime.Callers
			// gives the address after it.
			kept = append(kept, f.PC+1)
		}
		if !more {
			break
		}
	}
	if len(kept) == 0 {
		return pcs[:min(len(pcs), freeDepth)]
	}
	return kept
}
