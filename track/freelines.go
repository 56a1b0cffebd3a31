package track

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
// process, which are few, are numbered here once each (FreeLine), and a
// freed handle keeps the number.
//
// freeLines is a fixed intern table keyed by the program counters a Free
// captured: freeDepth frames and two more, a frame-pointer walk or
// runtime.Callers as the tracker captures. Nothing is symbolized on Free; a
// report turns a line into freeDepth frames (FreeSite). A line's number is
// the id the table gives it plus one: 0 is a line not kept, past a full
// table, which the tracker whose Free lost it counts (Totals.FreeLinesLost).
// Lookups take no lock and an insert takes one, once per distinct line; the
// table never grows or moves a line. It is process-wide: program counters
// are.
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

// freeDepth is how many frames of its caller's stack name a Free in
// reports.
const freeDepth = 2

// freeLine is what a Free captures: two frames more than a report keeps,
// for the wrapper frames a walk sees and runtime.Callers does not, such as
// those of a deferred Free (the defer statement's closure, and
// runtime.deferreturn where the defer is not open-coded).
type freeLine [freeDepth + 2]uintptr

const (
	freeLineSlots = 1 << 12
	// freeLineProbes bounds the slots a lookup tries: past them, the line
	// is not kept rather than searched for.
	freeLineProbes = 8
)

// FreeLine numbers the caller's line (skip as in Record) in the process's
// table of free lines, for FreeSite; 0 if the table is full
// (Totals.FreeLinesLost).
//
//go:noinline
func (bk *Books) FreeLine(skip int) uint32 {
	t := (*Tracker)(bk)
	var pcs freeLine
	t.capturePCs(max(skip, 0)+1, pcs[:])
	n := freeLines.number(&pcs)
	if n == 0 {
		t.freeLinesLost.Add(1)
	}
	return n
}

// capturePCs writes the physical frames of the caller's caller (skip as in
// Record, from the function calling capturePCs) into buf, interning
// nothing.
//
//go:noinline
func (t *Tracker) capturePCs(skip int, buf []uintptr) int {
	if !t.cfg.framePointers {
		// 0 is runtime.Callers, 1 is capturePCs, 2 the function calling it.
		return runtime.Callers(skip+2, buf)
	}
	// Capture's 0 is capturePCs.
	n, walked := fpstack.Capture(skip+1, buf)
	if !walked && fpstack.Enabled() { // refused by a guard, not turned off by the operator
		t.stackFallbacks.Add(1)
	}
	return n
}

// FreeSite returns the site of free line n (FreeLine), two frames; nil for
// 0. A walk names a deferred Free at its defer statement; deferred says so.
func (bk *Books) FreeSite(n uint32) (site *Site, deferred bool) {
	t := (*Tracker)(bk)
	pcs := freeLines.line(n)
	if len(pcs) == 0 {
		return nil, false
	}
	kept, deferred := reportedFrames(pcs)
	return t.Books().Intern(kept), deferred
}

// number returns the number of the line pcs names, adding it if it is new
// and there is room; 0 if there is none.
func (tab *freeLineTable) number(pcs *freeLine) uint32 {
	h := intern.NewHash().PCs(pcs[:]).Sum()
	same := func(l *keptLine) bool { return l.pcs == *pcs }
	l, ok := tab.table.Lookup(h, same)
	if !ok {
		l, ok = tab.table.Insert(h, same, func(id int) *keptLine {
			l := &keptLine{pcs: *pcs, number: uint32(id) + 1}
			tab.byNumber[id].Store(l)
			return l
		})
	}
	if !ok {
		return 0
	}
	return l.number
}

// line returns the program counters of line number n; nil for 0 and for a
// number never given.
func (tab *freeLineTable) line(n uint32) []uintptr {
	if n == 0 || n > freeLineSlots {
		return nil
	}
	l := tab.byNumber[n-1].Load()
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
// captured by a Free, wrapper frames (fpstack.IsWrapper) left out, as the
// program counters runtime.Callers would have given for them: a line reads
// the same whether the capture walked frame pointers or called
// runtime.Callers. A Free run by "defer x.Free()" is the exception: a walk
// holds the defer statement's closure, at the line of the statement, which
// is the line to change; its frame is kept, then the deferring function's
// caller (its own frame, at the line it returned or panicked at, and the
// runtime's frames that ran the call are left out), and deferred is true.
// It symbolizes, so it runs when a report needs the line, never on Free. A
// line none of whose frames symbolizes is returned as it is, cut to
// freeDepth.
func reportedFrames(pcs []uintptr) (kept []uintptr, deferred bool) {
	kept = make([]uintptr, 0, freeDepth)
	var outer string // the function that deferred the Free
	frames := runtime.CallersFrames(pcs)
	for len(kept) < freeDepth {
		f, more := frames.Next()
		// Frames backs each PC up into its call; runtime.Callers gives the
		// address after it, hence f.PC+1.
		if f.PC != 0 {
			if fn, ok := fpstack.DeferWrapper(f.Function); ok && len(kept) == 0 {
				kept, deferred, outer = append(kept, f.PC+1), true, fn
			} else if deferred && outer != "" && (f.Function == outer || f.Function == "runtime.gopanic") {
				if f.Function == outer {
					outer = "" // the deferring function's own frame: once
				}
			} else if !fpstack.IsWrapper(f) {
				kept = append(kept, f.PC+1)
			}
		}
		if !more {
			break
		}
	}
	if len(kept) == 0 {
		return pcs[:min(len(pcs), freeDepth)], false
	}
	return kept, deferred
}
