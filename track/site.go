package track

import (
	"github.com/tensorlife/tensorlife/internal/format"

	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/counter"
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
	// outlivedBytes, like outlivedHandleBytes and the other shapes'
	// bytes, counts records below wideRecord bytes; metas.wide the rest
	// (outlivedFigures reads both).
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

// A site's byte figures are sums of its records' bytes, and a sum of
// int64s can pass MaxInt64: five records near MaxInt64 bytes live at one
// line would wrap an int64 sum into nonsense. The record path keeps them
// exact by size:
//
//   - a slot counts records of one size, and its bytes are read as count ×
//     size in 128 bits (counter.Sum.AddMul): nothing to wrap;
//   - the other byte sums (the other shapes', the outlived bytes, the
//     outlived handles' bytes) keep records below wideRecord bytes in
//     atomic int64 sums, as before, and those of wideRecord bytes or more
//     in the site's wide part (siteWide), 128-bit sums under a lock, made
//     at the site's first such record. The atomic part of a sum cannot
//     wrap while fewer than 2^32 records below wideRecord are counted in
//     it: 2^32 records would take over 2^32 × unsafe.Sizeof(Record) bytes
//     of host memory, hundreds of GiB, before a byte of device memory.
//
// A reader holds the wide part's lock while it reads the atomic part, so
// that the two are of one moment (a record of wideRecord bytes or more
// changes both under that lock), adds them in 128 bits, and holds the sum
// at MaxInt64. A record below wideRecord pays one compare for it.

// wideRecord is the size from which a record's bytes are counted in its
// site's wide part.
const wideRecord = 1 << 32

// wide reports whether a record of bytes (or a change of -bytes) is
// counted in the wide part.
func wide(bytes int64) bool { return bytes >= wideRecord || bytes <= -wideRecord }

// siteWide are a site's byte sums of records of wideRecord bytes or more,
// exact, under mu; the counts of those records are in the site's atomic
// counters, changed under mu too.
type siteWide struct {
	mu                                 sync.Mutex
	otherMade, otherFreed, otherMoved  counter.Sum // the other shapes' (otherCount)
	outlivedBytes, outlivedHandleBytes counter.Sum
}

// wideOf returns s's wide part, made at its first use.
func (s *Site) wideOf() *siteWide { return s.metas.wideOf() }

func (sm *siteMetas) wideOf() *siteWide {
	if w := sm.wide.Load(); w != nil {
		return w
	}
	sm.wide.CompareAndSwap(nil, new(siteWide))
	return sm.wide.Load()
}

// readWide calls f with the site's wide part locked (nil if it has none),
// so that no record of wideRecord bytes changes the site's counters until
// f returns: what f reads of the atomic part and of the wide part is of
// one moment. f may run twice; its last run's reading stands.
func (sm *siteMetas) readWide(f func(w *siteWide)) {
	for {
		w := sm.wide.Load()
		if w != nil {
			w.mu.Lock()
			defer w.mu.Unlock()
			f(w)
			return
		}
		f(nil)
		if sm.wide.Load() == nil {
			return // no wide record began before f's last load: it read one moment
		}
		// A wide record's update began meanwhile: read again, under its lock.
	}
}

// recordBytes is a sum of records' bytes kept by one owner under its lock
// (what a request holds in flight at a site), split as a site's sums are:
// records below wideRecord bytes in small, exact modulo 2^64 (and below
// 2^64 while fewer than 2^32 of them are counted), the others in wide.
// The zero value is 0.
type recordBytes struct {
	small int64
	wide  counter.Sum
}

// add counts bytes (negative to take them back) of one record.
func (b *recordBytes) add(bytes int64) {
	if wide(bytes) {
		b.wide.Add(bytes)
		return
	}
	b.small += bytes
}

// load returns b held in [0, MaxInt64].
func (b *recordBytes) load() int64 {
	s := b.wide
	s.AddUint(uint64(b.small))
	return max(s.Load(), 0)
}

// outlived counts one record of bytes (negative, with count -1, to take
// it back) that outlived its request.
func (s *Site) outlived(bytes, count int64) {
	s.addPair(bytes, count, &s.outlivedBytes, &s.outlivedCount, func(w *siteWide) *counter.Sum { return &w.outlivedBytes })
}

// addPair adds bytes and count to one of the site's byte and count pairs,
// and tells the feeds: the bytes of a wide record (see wideRecord) to
// their sum in the wide part, wideBytes of it, under its lock with the
// count, so that a reader reads both at one moment; others to small.
func (s *Site) addPair(bytes, count int64, small, n *atomic.Int64, wideBytes func(*siteWide) *counter.Sum) {
	if wide(bytes) {
		w := s.wideOf()
		w.mu.Lock()
		wideBytes(w).Add(bytes)
		n.Add(count)
		w.mu.Unlock()
	} else {
		small.Add(bytes)
		n.Add(count)
	}
	s.feeds.changed(s)
}

// outlivedAll counts count records of b bytes in all that outlived their
// request at once (a request's end).
func (s *Site) outlivedAll(b *recordBytes, count int64) {
	if b.wide != (counter.Sum{}) {
		w := s.wideOf()
		w.mu.Lock()
		w.outlivedBytes.AddSum(b.wide)
		s.outlivedBytes.Add(b.small)
		s.outlivedCount.Add(count)
		w.mu.Unlock()
	} else {
		s.outlivedBytes.Add(b.small)
		s.outlivedCount.Add(count)
	}
	s.feeds.changed(s)
}

// outlivedFigures returns the records that outlived their request at s
// and their bytes, read at one moment and held at MaxInt64; and the
// handles taken at s that outlived theirs, with their records' bytes.
func (s *Site) outlivedFigures() (count int64, bytes counter.Sum, handles int64, handleBytes counter.Sum) {
	s.metas.readWide(func(w *siteWide) {
		count, handles = s.outlivedCount.Load(), s.outlivedHandles.Load()
		bytes, handleBytes = counter.Sum{}, counter.Sum{}
		bytes.AddUint(uint64(s.outlivedBytes.Load()))
		handleBytes.AddUint(uint64(s.outlivedHandleBytes.Load()))
		if w != nil {
			bytes.AddSum(w.outlivedBytes)
			handleBytes.AddSum(w.outlivedHandleBytes)
		}
	})
	return count, bytes, handles, handleBytes
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
