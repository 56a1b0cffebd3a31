package tensor

import (
	"runtime"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/fpstack"
	"github.com/tensorlife/tensorlife/internal/intern"
)

// The line that first freed a handle is kept for misuse reports (a double
// free, a use after free name it), yet almost never read. Keeping its
// program counters in every handle would cost 32 B per live tensor, an
// eighth of the 256 B budget; instead, the distinct Free lines of a
// process, which are few, are numbered here once each, and a freed handle
// keeps the number in its state word.
//
// freeLines is a fixed intern table keyed by the program counters Free
// captured: freeDepth frames and two more, as the tracker captures them (a
// frame-pointer walk or runtime.Callers). Nothing is symbolized on Free; a
// report turns a line into freeDepth frames (reportedFrames). A line's
// number is the id the table gives it plus firstFreeLine: state 0 is a live
// handle, freedUnknown a handle freed at a line not kept (an untracked
// tensor's, or one past a full table). Lookups take no lock and an insert
// takes one, once per distinct line; the table never grows or moves a line.
var freeLines = newFreeLineTable()

type freeLineTable struct {
	table *intern.Table[keptLine]
	// byNumber holds each kept line at its id, for reports to read back
	// without a lock.
	byNumber [freeLineSlots]atomic.Pointer[keptLine]
}

// keptLine is a line the table keeps, with its number.
type keptLine struct {
	pcs    freeLine
	number uint32
}

func newFreeLineTable() *freeLineTable {
	return &freeLineTable{table: intern.New[keptLine](intern.Limits{Slots: freeLineSlots, Values: freeLineSlots, Probes: freeLineProbes})}
}

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
	h := intern.NewHash().PCs(pcs[:]).Sum()
	same := func(l *keptLine) bool { return l.pcs == *pcs }
	l, ok := tab.table.Lookup(h, same)
	if !ok {
		l, ok = tab.table.Insert(h, same, func(id int) *keptLine {
			l := &keptLine{pcs: *pcs, number: uint32(id) + firstFreeLine}
			tab.byNumber[id].Store(l)
			return l
		})
	}
	if !ok {
		return freedUnknown
	}
	return l.number
}

// line returns the program counters of line number n; nil for
// freedUnknown and for a live handle's state.
func (tab *freeLineTable) line(n uint32) []uintptr {
	if n < firstFreeLine {
		return nil
	}
	l := tab.byNumber[n-firstFreeLine].Load()
	if l == nil {
		return nil
	}
	pcs := l.pcs[:]
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
