package retainers

import (
	"slices"
	"strings"
	"time"
)

// rootKind says what kind of root a path starts from.
type rootKind uint8

const (
	rootSegment         rootKind = iota // a word of the data or bss segment: a package variable
	rootFrame                           // a word of a goroutine's stack frame
	rootFinalizer                       // a field of an object with a finalizer, or the finalizer itself
	rootQueuedFinalizer                 // an object whose finalizer is queued, or its function
	rootDefer                           // a deferred call's function value
	rootPanic                           // a panic's value
	rootOther                           // a root the runtime names
)

// root is one pointer the garbage collector starts from.
type root struct {
	kind rootKind
	// index is the segment, goroutine, finalizer, defer, panic or other
	// root's index in the dump; frame is the frame's index in the
	// goroutine.
	index, frame int
	// off is the pointer's offset in the segment, the frame (from sp), or
	// the finalized object; -1 for a finalizer's own function.
	off  int64
	addr uint64 // the pointer
	// viaFrame and via, for a word of a stack-allocated object (a small
	// slice's backing array, an address-taken local): the frame and the
	// offset of the precise pointer slot that points at the object.
	// via is -1 for other roots.
	viaFrame int
	via      int64
}

// maxStackObject bounds the bytes of a stack-allocated object scanned.
const maxStackObject = 1 << 10

// roots lists the dump's roots in the order the search prefers them when
// two paths are equally short: package variables, then the stacks of user
// goroutines, then finalizers and the rest, then system goroutines.
// Frames whose function skip reports true are left out.
func (d *heapDump) roots(skip func(g *goroutine, f *frame, i int) bool) []root {
	var out []root
	for si := range d.segments {
		s := &d.segments[si]
		d.pointers(s.fields, s.data, s.size, func(off, p uint64) bool {
			out = append(out, root{kind: rootSegment, index: si, off: int64(off), addr: p, via: -1})
			return true
		})
	}
	frames := func(system bool) {
		for gi := range d.goroutines {
			g := &d.goroutines[gi]
			if g.system != system {
				continue
			}
			// The goroutine's own code first, then the frames it is
			// blocked in: a goroutine parked in select, on a channel or
			// on a mutex holds what its code holds, and the runtime's
			// frames point into that code's frame (selectgo's cases, a
			// receive's destination), which would otherwise name
			// runtime.selectgo's local for the user's.
			for _, fi := range libraryLast(g) {
				f := &g.frames[fi]
				if skip != nil && skip(g, f, fi) {
					continue
				}
				d.pointers(f.fields, f.data, f.size, func(off, p uint64) bool {
					if sj := g.frameOf(p); sj >= 0 {
						if skip == nil || !skip(g, &g.frames[sj], sj) {
							out = d.stackObject(out, gi, sj, fi, int64(off), p)
						}
						return true
					}
					out = append(out, root{kind: rootFrame, index: gi, frame: fi, off: int64(off), addr: p, via: -1})
					return true
				})
			}
		}
	}
	frames(false)
	for fi, f := range d.finalizers {
		kind := rootFinalizer
		if f.queued {
			kind = rootQueuedFinalizer
			out = append(out, root{kind: kind, index: fi, off: -2, addr: f.obj, via: -1})
		}
		out = append(out, root{kind: kind, index: fi, off: -1, addr: f.fn, via: -1})
		if i := d.find(f.obj); i >= 0 && !f.queued {
			// The collector keeps what a finalized object points at,
			// not the object: its fields are the roots.
			o := &d.objects[i]
			d.pointers(o.fields, o.data, o.size, func(off, p uint64) bool {
				out = append(out, root{kind: kind, index: fi, off: int64(off + o.addr - f.obj), addr: p, via: -1})
				return true
			})
		}
	}
	for di, df := range d.defers {
		out = append(out, root{kind: rootDefer, index: di, addr: df.fn, via: -1})
	}
	for pi, p := range d.panics {
		out = append(out, root{kind: rootPanic, index: pi, addr: p.data, via: -1})
	}
	for oi, o := range d.others {
		out = append(out, root{kind: rootOther, index: oi, addr: o.addr, via: -1})
	}
	frames(true)
	return out
}

// libraryLast returns the indices of g's frames, innermost first, those of
// the packages a goroutine blocks in (blockingFrame) after all others.
func libraryLast(g *goroutine) []int {
	order := make([]int, 0, len(g.frames))
	for pass := range 2 {
		for fi := range g.frames {
			if blockingFrame(g.frames[fi].name) == (pass == 1) {
				order = append(order, fi)
			}
		}
	}
	return order
}

// blockingFrame reports whether the function name belongs to a package a
// goroutine blocks in rather than to the code that called it: the runtime
// (select, channels, sleeping, semaphores) and package sync (mutexes,
// wait groups, conditions), whose frames hold the waiter's addresses and
// nothing of its own that a person would change.
func blockingFrame(name string) bool {
	pkg, _ := splitFuncName(name)
	switch pkg {
	case "runtime", "sync", "internal/sync", "time":
		return true
	}
	return strings.HasPrefix(pkg, "runtime/") || strings.HasPrefix(pkg, "internal/runtime/")
}

// frameOf returns the index of g's frame whose memory holds addr; -1 if
// none does.
func (g *goroutine) frameOf(addr uint64) int {
	for i := range g.frames {
		if f := &g.frames[i]; addr >= f.sp && addr < f.sp+f.size {
			return i
		}
	}
	return -1
}

// stackObject adds the roots of an object on a goroutine's stack, which a
// precise slot (frame fi, offset via) points at. The dump records pointer
// slots of live variables only, not the layout of objects the compiler
// placed on the stack (a small slice's backing array, since Go 1.25), so
// the object's words are read conservatively, from where the slot points
// to the end of its frame, at most maxStackObject bytes: each word that
// points into the heap is a root.
func (d *heapDump) stackObject(out []root, gi, sj, fi int, via int64, p uint64) []root {
	f := &d.goroutines[gi].frames[sj]
	start := p - f.sp
	end := min(f.size, start+maxStackObject)
	for off := start &^ (d.ptrSize - 1); off+d.ptrSize <= end; off += d.ptrSize {
		w := d.word(f.data + int(off))
		if w == 0 || d.find(w) < 0 {
			continue
		}
		out = append(out, root{kind: rootFrame, index: gi, frame: sj, off: int64(off), addr: w, viaFrame: fi, via: via})
	}
	return out
}

// hop is how the search reached an object: from a root, or from another
// object's pointer field.
type hop struct {
	// from is the object index the pointer is in; -1 when it is a root,
	// whose index is then root.
	from int32
	root int32
	off  uint32 // the pointer's offset in from
}

// graphSearch is a breadth-first search from every root at once, so that
// the first time it reaches an object is along a shortest path.
type graphSearch struct {
	d        *heapDump
	roots    []root
	reached  []hop // by object; from == -2: not reached
	depth    []uint16
	maxDepth int
	deadline time.Time
	// stopped says why the search ended before visiting all it could.
	stopped string
}

const unreached = -2

// search runs the breadth-first search until every target object is
// reached, the depth bound is met, or the deadline passes. Targets are not
// followed: a path to one target never runs through another. Blocked
// objects are neither reached nor followed: the caller's own list of the
// targets is one.
func (d *heapDump) search(roots []root, targets, blocked []int, maxDepth int, deadline time.Time) *graphSearch {
	s := &graphSearch{d: d, roots: roots, reached: make([]hop, len(d.objects)), depth: make([]uint16, len(d.objects)),
		maxDepth: maxDepth, deadline: deadline}
	for i := range s.reached {
		s.reached[i].from = unreached
	}
	for _, b := range blocked {
		if b >= 0 {
			s.reached[b].from = -3 // never unreached: never entered
		}
	}
	isTarget := make(map[int]bool, len(targets))
	left := 0
	for _, t := range targets {
		if t >= 0 && !isTarget[t] {
			isTarget[t] = true
			left++
		}
	}
	var queue []int32
	for ri, r := range roots {
		o := d.find(r.addr)
		if o < 0 || s.reached[o].from != unreached {
			continue
		}
		s.reached[o] = hop{from: -1, root: int32(ri)}
		s.depth[o] = 1
		if isTarget[o] {
			left--
			continue
		}
		queue = append(queue, int32(o))
	}
	for n := 0; len(queue) > 0 && left > 0; n++ {
		if n&4095 == 4095 && !deadline.IsZero() && time.Now().After(deadline) {
			s.stopped = "the search ran out of time"
			break
		}
		cur := queue[0]
		queue = queue[1:]
		if int(s.depth[cur]) >= maxDepth {
			s.stopped = "paths longer than the bound were not followed"
			continue
		}
		o := &d.objects[cur]
		d.pointers(o.fields, o.data, o.size, func(off, p uint64) bool {
			next := d.find(p)
			if next < 0 || s.reached[next].from != unreached {
				return true
			}
			s.reached[next] = hop{from: cur, off: uint32(off)}
			s.depth[next] = s.depth[cur] + 1
			if isTarget[next] {
				left--
				return left > 0
			}
			queue = append(queue, int32(next))
			return true
		})
	}
	return s
}

// chain is a path found by the search: its root and the objects from the
// root to the target, each with the offset of the pointer that leaves it.
type chain struct {
	root    root
	objects []int    // from the root's target to the search's target
	offs    []uint64 // offs[i]: the pointer in objects[i] to objects[i+1]
}

// pathTo returns the path to the object at index o; false if unreached.
func (s *graphSearch) pathTo(o int) (chain, bool) {
	if o < 0 || s.reached[o].from == unreached || s.reached[o].from == -3 {
		return chain{}, false
	}
	var c chain
	for cur := int32(o); ; {
		h := s.reached[cur]
		c.objects = append(c.objects, int(cur))
		if h.from == -1 {
			c.root = s.roots[h.root]
			break
		}
		c.offs = append(c.offs, uint64(h.off))
		cur = h.from
	}
	slices.Reverse(c.objects)
	slices.Reverse(c.offs)
	return c, true
}

// skipOwnFrames returns the frame filter for the search of the goroutine
// that wrote the dump: its innermost frames, up to the first one outside
// the runtime, this package and the packages named by own, hold the
// targets only because the caller pinned them, and are not roots. Every
// other goroutine's frames are roots, whatever runs in them.
func skipOwnFrames(dumper uint64, own []string) func(g *goroutine, f *frame, i int) bool {
	return func(g *goroutine, f *frame, i int) bool {
		if g.id != dumper {
			return false
		}
		for j := 0; j <= i; j++ {
			if !isOwnFrame(g.frames[j].name, own) {
				return false
			}
		}
		return true
	}
}

// isOwnFrame reports whether the function name belongs to the runtime, to
// this package, or to a package of own (import paths); tests of those
// packages (function names starting with Test, Benchmark, Example, Fuzz)
// are not theirs.
func isOwnFrame(name string, own []string) bool {
	pkg, fn := splitFuncName(name)
	if strings.HasPrefix(fn, "Test") || strings.HasPrefix(fn, "Benchmark") ||
		strings.HasPrefix(fn, "Example") || strings.HasPrefix(fn, "Fuzz") {
		return false
	}
	switch pkg {
	case "runtime", "runtime/debug", selfPackage:
		return true
	}
	return slices.Contains(own, pkg)
}

// selfPackage is this package's import path.
const selfPackage = "github.com/tensorlife/tensorlife/internal/retainers"

// splitFuncName splits a function's symbol name into its package's import
// path and the rest: "a/b.(*T).M.func1" → "a/b", "(*T).M.func1".
func splitFuncName(name string) (pkg, rest string) {
	slash := strings.LastIndexByte(name, '/')
	dot := strings.IndexByte(name[slash+1:], '.')
	if dot < 0 {
		return name, ""
	}
	return name[:slash+1+dot], name[slash+1+dot+1:]
}
