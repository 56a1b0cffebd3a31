package track

import (
	"github.com/tensorlife/tensorlife/internal/format"

	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/fpstack"
	"github.com/tensorlife/tensorlife/internal/intern"
)

// maxDepth is the deepest call stack kept per site, as in runtime/pprof.
const maxDepth = 32

// Site is an interned call stack, symbolized on first use; sites of one
// tracker compare by pointer.
type Site struct {
	// A feed's read of a changed site (Stats) touches told, the counters
	// below and metas' first ones: kept first and together, they share
	// few cache lines.
	told  atomic.Uint64 // the feeds told of a change not yet read
	feeds *feedSet      // the tracker's, told when outlived figures change
	// Made and released records are counted by Meta and size in metas
	// (counted.go), one add each; live figures are derived from them.
	gcLeaks atomic.Int64
	// outlivedBytes and outlivedCount are the live allocations that
	// outlived their request (see WithRequest): what a watcher judges.
	outlivedBytes atomic.Int64
	outlivedCount atomic.Int64
	// outlivedHandles and outlivedHandleBytes are the handles taken here
	// under a request (Record.HoldUnder) still held after it ended, and
	// the bytes of the records they hold.
	outlivedHandles     atomic.Int64
	outlivedHandleBytes atomic.Int64
	metas               siteMetas   // made and released records by Meta and size
	held                siteHolders // the handles holding its records once their own are gone (HeldBy)

	id       int
	hash     uint64
	pcs      []uintptr
	overflow bool

	symOnce sync.Once
	frames  []Frame
	user    int // index of the first frame outside the library

	// helpers are the tracker's HelperFunctions; head caches the index of
	// the headline frame (the first neither tensorlife's nor a helper's)
	// plus one, 0 until computed: the rules never change once the tracker
	// is made, so neither does the headline.
	helpers *helperRules
	head    atomic.Uint64
}

// outlived counts bytes and count (negative to take them back) of
// allocations that outlived their request.
func (s *Site) outlived(bytes, count int64) {
	s.outlivedBytes.Add(bytes)
	s.outlivedCount.Add(count)
	s.feeds.changed(s)
}

// Frame is one symbolized frame of a Site.
type Frame struct {
	PC       uintptr
	Function string
	File     string
	Line     int
	Entry    uintptr // the function's entry PC; 0 if unknown
}

// String renders the frame as "function (file:line)".
func (f Frame) String() string {
	return fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line)
}

// ID is the site's index in its tracker, in order of first use.
func (s *Site) ID() int { return s.id }

// Overflow reports whether s is the overflow site.
func (s *Site) Overflow() bool { return s.overflow }

// Frames returns the stack, leaf first, inlined calls expanded; shared.
func (s *Site) Frames() []Frame {
	s.symbolize()
	return s.frames
}

// UserFrames returns Frames from the first user frame on.
func (s *Site) UserFrames() []Frame {
	s.symbolize()
	return s.frames[s.headline():]
}

// headline returns the index of the first frame that is neither
// tensorlife's nor a helper's: O(frames) the first time, a load after.
// Two goroutines may both compute it; they store the same value.
func (s *Site) headline() int {
	if v := s.head.Load(); v != 0 {
		return int(v - 1)
	}
	i := s.user
	for i < len(s.frames) && (isLibraryFrame(s.frames[i]) || isHelperFrame(s.frames[i], s.helpers)) {
		i++
	}
	if i == len(s.frames) {
		i = s.user // nothing but helpers: name the outermost library caller
	}
	s.head.Store(uint64(i) + 1)
	return i
}

// Location is the first user frame: the line to change.
func (s *Site) Location() Frame {
	f := s.UserFrames()
	if len(f) == 0 {
		return Frame{Function: format.UnknownFunction}
	}
	return f[0]
}

// String renders the site as its location, "function (file:line)".
func (s *Site) String() string { return s.Location().String() }

// Stack renders the user frames one per line, indented by indent.
func (s *Site) Stack(indent string) string {
	var b strings.Builder
	for _, f := range s.UserFrames() {
		fmt.Fprintf(&b, "%s%s\n%s\t%s:%d\n", indent, f.Function, indent, f.File, f.Line)
	}
	return b.String()
}

func (s *Site) symbolize() {
	s.symOnce.Do(func() {
		if s.overflow {
			s.frames = []Frame{{Function: format.OverflowFunction, File: "tensorlife", Line: 0}}
			return
		}
		frames := runtime.CallersFrames(s.pcs)
		for {
			f, more := frames.Next()
			fr := Frame{PC: f.PC, Function: f.Function, File: f.File, Line: f.Line, Entry: f.Entry}
			if fr.Function == "" {
				fr.Function = format.UnknownFunction
			}
			if outer, ok := fpstack.DeferWrapper(fr.Function); ok {
				fr.Function = outer // a deferred Free's line: named by the function that deferred it
			}
			s.frames = append(s.frames, fr)
			if !more {
				break
			}
		}
		if len(s.frames) == 0 {
			s.frames = []Frame{{Function: format.UnknownFunction}}
		}
		for s.user < len(s.frames) && isLibraryFrame(s.frames[s.user]) {
			s.user++
		}
		if s.user == len(s.frames) {
			s.user = 0
		}
	})
}

// modulePrefix is the import path prefix of tensorlife's packages.
const modulePrefix = "github.com/tensorlife/tensorlife/"

// libraryPackages are the packages whose frames are trimmed from the leaf end
// of a stack: they are how memory was asked for, not who asked.
var libraryPackages = []string{"tensor", "track", "pool", "mask", "pprofexport", "internal"}

// isLibraryFrame reports whether f belongs to tensorlife's own library code
// (not its examples and not test files) or to a package AdapterPackages
// marked, which reports trim from the leaf end.
func isLibraryFrame(f Frame) bool {
	rest, ok := strings.CutPrefix(f.Function, modulePrefix)
	if !ok || strings.HasSuffix(f.File, "_test.go") {
		return isAdapterFrame(f)
	}
	for _, p := range libraryPackages {
		if r, ok := strings.CutPrefix(rest, p); ok && r != "" && (r[0] == '.' || r[0] == '/') {
			return true
		}
	}
	return isAdapterFrame(f) // a contrib adapter of this module
}

// stackTable interns stacks in a fixed-size intern table. Lookups of a
// known stack, the hot path, take no lock: a hash, a probe and a compare.
// The table keeps at most maxSites sites; new stacks past them are
// attributed to the overflow site. Its probes are bounded by its size
// alone, and it has twice as many slots as sites, so that overflow starts
// when maxSites sites exist, never earlier, as MaxSites promises.
type stackTable struct {
	table    *intern.Table[Site]
	count    atomic.Int64 // sites kept, the overflow site excluded (Totals.Sites)
	overflow *Site
	helpers  *helperRules // given to each site
	feeds    *feedSet     // given to each site

	// order lists sites by id for snapshots; appended under mu (inside
	// the table's insert), read as a copy of the slice header under mu.
	mu    sync.Mutex
	order []*Site
}

func newStackTable(maxSites int, helpers *helperRules, feeds *feedSet) *stackTable {
	t := &stackTable{
		table:    intern.New[Site](intern.Limits{Slots: 2 * maxSites, Values: maxSites, Probes: 2 * maxSites}),
		overflow: &Site{id: 0, overflow: true, feeds: feeds},
		helpers:  helpers,
		feeds:    feeds,
	}
	t.order = append(t.order, t.overflow)
	return t
}

// intern returns the Site for pcs, creating it if the table has room.
func (t *stackTable) intern(pcs []uintptr) *Site {
	h := intern.NewHash().PCs(pcs).Sum()
	same := func(s *Site) bool { return s.hash == h && slices.Equal(s.pcs, pcs) }
	if s, ok := t.table.Lookup(h, same); ok {
		return s
	}
	s, ok := t.table.Insert(h, same, func(id int) *Site {
		// The table numbers sites from 0 in the order it keeps them,
		// before they become visible; 0 is the overflow site's.
		s := &Site{id: id + 1, hash: h, pcs: append([]uintptr(nil), pcs...), helpers: t.helpers, feeds: t.feeds}
		t.mu.Lock()
		t.order = append(t.order, s)
		t.mu.Unlock()
		t.count.Add(1)
		return s
	})
	if !ok {
		return t.overflow
	}
	return s
}

// sites returns every site, the overflow site first, in id order.
func (t *stackTable) sites() []*Site {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.order[:len(t.order):len(t.order)]
}

// DistinctFrame returns the frame telling s apart from others of its Location.
func (s *Site) DistinctFrame(others []*Site) (f Frame, ok bool) {
	loc := s.Location()
	var rivals []*Site
	for _, o := range others {
		if o != nil && o != s && sameLine(o.Location(), loc) {
			rivals = append(rivals, o)
		}
	}
	if len(rivals) == 0 {
		return Frame{}, false
	}
	mine := s.UserFrames()
	for k := 1; k < len(mine); k++ {
		rivals = slices.DeleteFunc(rivals, func(o *Site) bool {
			theirs := o.UserFrames()
			return k >= len(theirs) || !sameLine(theirs[k], mine[k])
		})
		if len(rivals) == 0 {
			return mine[k], true
		}
	}
	// Rootward, s is a prefix of the rivals left: look leafward.
	all, head := s.Frames(), s.headline()
	for k := 1; k <= head; k++ {
		rivals = slices.DeleteFunc(rivals, func(o *Site) bool {
			theirs, h := o.Frames(), o.headline()
			return k > h || !sameLine(theirs[h-k], all[head-k])
		})
		if len(rivals) == 0 {
			return all[head-k], true
		}
	}
	return Frame{}, false
}

func sameLine(a, b Frame) bool {
	return a.Line == b.Line && a.Function == b.Function && a.File == b.File
}
