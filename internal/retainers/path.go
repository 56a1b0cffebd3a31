package retainers

import (
	"debug/dwarf"
	"fmt"
	"strconv"
	"strings"
)

// RootKind says what kind of root a path starts from.
type RootKind uint8

const (
	// PackageVar: a package-level variable (the data or bss segment).
	PackageVar RootKind = iota + 1
	// Goroutine: a local variable, parameter or stack slot of a goroutine's
	// frame.
	Goroutine
	// Finalizer: an object with a finalizer (which keeps what the object
	// points at), the finalizer's function, or a finalizer queued to run.
	Finalizer
	// Other: a deferred call, a panic's value, or a root the runtime names.
	Other
)

// Path is the shortest chain of references found from a root to one
// target.
type Path struct {
	// Kind is the kind of root the path starts from.
	Kind RootKind
	// Root names the root: "package var main.maskCache",
	// "goroutine 18 [chan receive], created by main.serve at
	// server.go:31: frame main.worker (worker.go:40), local t".
	Root string
	// Expr is the rest of the path, from the root's value to the target,
	// in Go's syntax where there is one: `["prompt-17"]`, ".items[3]",
	// " → closure main.init.func1, captured m".
	Expr string
	// Type is the type of the root's variable, when known.
	Type string
	// Hops counts the heap objects between the root and the target.
	Hops int
}

// String renders the path as a report prints it:
//
//	package var main.maskCache["prompt-17"]   (map[string]*tensor.Tensor)
func (p Path) String() string {
	s := p.Root + p.Expr
	if p.Type != "" {
		s += "   (" + p.Type + ")"
	}
	return s
}

// name renders a chain found by the search.
func (n *namer) name(c chain) Path {
	p := Path{Hops: len(c.objects) - 1}
	segs, cur := n.nameRoot(c.root, &p)
	for i := 0; i+1 < len(c.objects); i++ {
		o := &n.d.objects[c.objects[i]]
		land := uint64(0)
		if i == 0 {
			land = c.root.addr - o.addr
		} else {
			land = n.pointerAt(c.objects[i-1], c.offs[i-1]) - o.addr
		}
		more, next := n.step(cur, o, land, c.offs[i])
		segs = append(segs, more...)
		cur = next
	}
	p.Expr = render(segs)
	return p
}

// pointerAt reads the pointer at off of object i.
func (n *namer) pointerAt(i int, off uint64) uint64 {
	o := &n.d.objects[i]
	return n.d.word(o.data + int(off))
}

// nameRoot names r and the path inside the root's variable to its pointer.
func (n *namer) nameRoot(r root, p *Path) ([]seg, cursor) {
	switch r.kind {
	case rootSegment:
		p.Kind = PackageVar
		return n.nameGlobal(r, p)
	case rootFrame:
		p.Kind = Goroutine
		return n.nameFrame(r, p)
	case rootFinalizer, rootQueuedFinalizer:
		p.Kind = Finalizer
		return n.nameFinalizer(r, p)
	case rootDefer:
		p.Kind = Other
		df := n.d.defers[r.index]
		p.Root = "a deferred call of " + n.goroutineName(df.goroutine)
		return nil, cursor{closure: true}
	case rootPanic:
		p.Kind = Other
		pr := n.d.panics[r.index]
		p.Root = "the value of a panic in " + n.goroutineName(pr.goroutine)
		dyn := n.typeAt(pr.typ)
		if dyn != nil && n.pointerShaped(dyn) {
			_, c, _ := n.locate(dyn, nil, 0, false, 0)
			return nil, c
		}
		return nil, cursor{typ: dyn}
	default:
		p.Kind = Other
		p.Root = "runtime root " + n.d.others[r.index].what
		return nil, cursor{}
	}
}

// nameGlobal names a pointer in the data or bss segment: the package
// variable from the DWARF (with its type, so the path goes on inside it) or
// the symbol table.
func (n *namer) nameGlobal(r root, p *Path) ([]seg, cursor) {
	s := &n.d.segments[r.index]
	addr := s.addr + uint64(r.off)
	if g, t, ok := n.dw.globalAt(addr - n.bin.slide); ok {
		p.Root = "package var " + g.name
		p.Type = displayName(t)
		start := g.addr + n.bin.slide - s.addr
		b := n.d.buf[s.data+int(start) : s.data+int(s.size)]
		segs, c, ok := n.locate(t, b, int64(addr-(g.addr+n.bin.slide)), false, 0)
		if !ok {
			return []seg{{kind: segUnknown, n: int64(addr - (g.addr + n.bin.slide)), size: uint64(n.dw.sizeOf(t))}}, cursor{}
		}
		return segs, c
	}
	if segs, c, ok := n.staticObject(addr, p); ok {
		return segs, c
	}
	if sym, ok := n.bin.symbolAt(addr); ok {
		p.Root = "package var " + sym.name
		if addr != sym.addr {
			p.Root += fmt.Sprintf(" (+%d)", addr-sym.addr)
		}
		return nil, cursor{}
	}
	p.Root = fmt.Sprintf("a package variable (%s segment +%#x)", s.name, r.off)
	return nil, cursor{}
}

// maxStatic bounds the size of a statically allocated object the namer
// looks for the pointer to.
const maxStatic = 1 << 16

// staticObject names a word of an object the linker placed in the data or
// bss segment (a package-level &T{...}), which has no symbol of its own: by
// the package variable that points at it.
func (n *namer) staticObject(addr uint64, p *Path) ([]seg, cursor, bool) {
	if n.dw == nil {
		return nil, cursor{}, false
	}
	var best uint64
	var owner global
	var ownerType, elem *dtype
	for si := range n.d.segments {
		s := &n.d.segments[si]
		n.d.pointers(s.fields, s.data, s.size, func(off, v uint64) bool {
			if v > addr || addr-v >= maxStatic || v < best {
				return true
			}
			g, t, ok := n.dw.globalAt(s.addr + off - n.bin.slide)
			if !ok || g.addr+n.bin.slide != s.addr+off {
				return true
			}
			u := n.dw.underlying(t)
			if u == nil || u.tag != dwarf.TagPointerType {
				return true
			}
			e := n.dw.typ(u.ref)
			if size := n.dw.sizeOf(e); size <= 0 || addr >= v+uint64(size) {
				return true
			}
			best, owner, ownerType, elem = v, g, t, e
			return true
		})
	}
	if elem == nil {
		return nil, cursor{}, false
	}
	p.Root = "package var " + owner.name
	p.Type = displayName(ownerType)
	var b []byte
	for si := range n.d.segments {
		s := &n.d.segments[si]
		if best >= s.addr && best < s.addr+s.size {
			b = n.d.buf[s.data+int(best-s.addr) : s.data+int(s.size)]
		}
	}
	segs, c, ok := n.locate(elem, b, int64(addr-best), false, 0)
	if !ok {
		return []seg{{kind: segUnknown, n: int64(addr - best), size: uint64(n.dw.sizeOf(elem))}}, cursor{}, true
	}
	return segs, c, true
}

// goroutineName names a goroutine by its id, state and creator.
func (n *namer) goroutineName(addr uint64) string {
	for i := range n.d.goroutines {
		if n.d.goroutines[i].addr == addr {
			return n.describeGoroutine(&n.d.goroutines[i])
		}
	}
	return "a goroutine"
}

// goroutine statuses as the runtime numbers them.
var statusNames = map[uint64]string{0: "idle", 1: "runnable", 2: "running", 3: "syscall", 4: "waiting",
	6: "dead", 8: "copystack", 9: "preempted", 10: "leaked"}

func (n *namer) describeGoroutine(g *goroutine) string {
	state := g.waitReason
	if state == "" {
		state = statusNames[g.status]
	}
	if state == "" {
		state = fmt.Sprintf("status %d", g.status)
	}
	s := fmt.Sprintf("goroutine %d [%s]", g.id, state)
	if g.system {
		s += " (runtime)"
	}
	if name, _, ok := n.funcName(g.gopc); ok && g.gopc != 0 {
		s += ", created by " + name + " at " + fileLine(g.gopc, true, name)
	}
	return s
}

// nameFrame names a pointer in a stack frame: the local variable or
// parameter that holds it, from the DWARF location lists at the frame's pc;
// the stack slot when there is no DWARF, or no variable is there.
func (n *namer) nameFrame(r root, p *Path) ([]seg, cursor) {
	if r.via >= 0 {
		return n.nameStackObject(r, p)
	}
	g := &n.d.goroutines[r.index]
	f := &g.frames[r.frame]
	outer := r.frame > 0
	p.Root = n.describeGoroutine(g) + ": frame " + f.name + " (" + n.frameLine(f, outer) + ")"
	addr := f.sp + uint64(r.off)
	// The frame's own variables, then the parameters of the frame it
	// called, which live in this frame's outgoing arguments.
	if segs, c, ok := n.frameVar(f, outer, addr, p); ok {
		return segs, c
	}
	if r.frame > 0 {
		child := &g.frames[r.frame-1]
		if segs, c, ok := n.frameVar(child, r.frame-1 > 0, addr, p); ok {
			return segs, c
		}
	}
	p.Root += fmt.Sprintf(", stack slot sp+%#x", r.off)
	return nil, cursor{}
}

// frameLine returns the file:line frame f is at, in f's own function: where
// the runtime's line table gives the line of a call inlined there (a
// goroutine parked in an inlined sync.Mutex.Lock is at mutex.go's line),
// the DWARF gives the line of the inlined call in f's function, and the
// file is that function's.
func (n *namer) frameLine(f *frame, outer bool) string {
	at := fileLine(f.pc, outer, f.name)
	pc := f.pc
	if outer {
		pc--
	}
	fn, ok := n.dw.funcAt(pc - n.bin.slide)
	if !ok {
		return at
	}
	line, ok := n.dw.callLine(fn, pc-n.bin.slide)
	if !ok {
		return at
	}
	own := fileLine(fn.lowpc+n.bin.slide, false, f.name) // the function's own file, at its entry
	file, _, found := strings.Cut(own, ":")
	if !found || file == "" {
		return at
	}
	return file + ":" + strconv.FormatInt(line, 10)
}

// nameStackObject names a word of an object on the stack: by the variable
// whose slot points at the object, then the step into it; or, when that
// slot is a blocking frame's pointing into its caller's code, by that
// code's own frame.
func (n *namer) nameStackObject(r root, p *Path) ([]seg, cursor) {
	g := &n.d.goroutines[r.index]
	if blockingFrame(g.frames[r.viaFrame].name) && !blockingFrame(g.frames[r.frame].name) {
		// The runtime's frames point into the waiter's (selectgo at its
		// cases, a receive at its destination): the word is the
		// waiter's, and named by the waiter's frame.
		own := r
		own.via = -1
		return n.nameFrame(own, p)
	}
	via := r
	via.frame, via.off, via.via = r.viaFrame, r.via, -1
	segs, c := n.nameFrame(via, p)
	f := &g.frames[r.frame]
	obj := object{addr: f.sp, size: f.size, data: f.data}
	target := n.d.word(g.frames[r.viaFrame].data + int(r.via)) // where the slot points
	more, next := n.step(c, &obj, target-f.sp, uint64(r.off))
	if len(more) == 1 && more[0].kind == segUnknown {
		more = []seg{{kind: segStack, n: int64(f.sp + uint64(r.off) - target)}}
	}
	return append(segs, more...), next
}

// frameVar finds the variable of frame f that the stack word at addr is
// part of.
func (n *namer) frameVar(f *frame, outer bool, addr uint64, p *Path) ([]seg, cursor, bool) {
	if n.dw == nil {
		return nil, cursor{}, false
	}
	pc := f.pc
	if outer {
		pc--
	}
	link := pc - n.bin.slide
	fn, ok := n.dw.funcAt(link)
	if !ok {
		return nil, cursor{}, false
	}
	cfa := f.sp + f.size
	vars := n.dw.varsOf(fn)
	for i := range vars {
		v := &vars[i]
		if !inRanges(v.ranges, link) {
			continue
		}
		vt := n.dw.typ(v.typ)
		size := n.dw.sizeOf(vt)
		if size <= 0 {
			continue
		}
		loc := n.dw.location(v, fn, link)
		if loc == nil {
			continue
		}
		var at int64 // the piece's offset in the variable
		for _, pc := range pieces(loc) {
			psize := pc.size
			if psize < 0 {
				psize = size
			}
			start := cfa + uint64(pc.cfaOff)
			if pc.onStack && addr >= start && addr < start+uint64(psize) {
				rel := at + int64(addr-start)
				b := n.varBytes(f, cfa, loc, size)
				what := "local"
				if v.param {
					what = "parameter"
				}
				if v.inlined != "" {
					p.Root += ", inlined " + v.inlined
				}
				p.Root += ", " + what + " " + strings.TrimPrefix(v.name, "&")
				p.Type = displayName(vt)
				segs, c, ok := n.locate(vt, b, rel, false, 0)
				if !ok {
					return []seg{{kind: segUnknown, n: rel, size: uint64(size)}}, cursor{}, true
				}
				return segs, c, true
			}
			at += psize
		}
	}
	return nil, cursor{}, false
}

// varBytes assembles what the frame holds of a variable located by loc;
// parts in registers read as zero.
func (n *namer) varBytes(f *frame, cfa uint64, loc []byte, size int64) []byte {
	if size > 1<<16 {
		size = 1 << 16
	}
	out := make([]byte, size)
	var at int64
	for _, pc := range pieces(loc) {
		psize := pc.size
		if psize < 0 {
			psize = size
		}
		if pc.onStack {
			start := int64(cfa) + pc.cfaOff - int64(f.sp)
			for k := int64(0); k < psize && at+k < size; k++ {
				if start+k >= 0 && uint64(start+k) < f.size {
					out[at+k] = n.d.buf[f.data+int(start+k)]
				}
			}
		}
		at += psize
	}
	return out
}

// nameFinalizer names a root of a finalizer: a field of the object it is
// set on (typed by the finalizer's record), or its function.
func (n *namer) nameFinalizer(r root, p *Path) ([]seg, cursor) {
	fz := n.d.finalizers[r.index]
	fnName, _, _ := n.funcName(fz.code)
	if fnName == "" {
		fnName = "?"
	}
	objType := n.typeAt(fz.objType)
	var elem *dtype
	if u := n.dw.underlying(objType); u != nil && u.tag == dwarf.TagPointerType {
		elem = n.dw.typ(u.ref)
	}
	what := "an object"
	if objType != nil {
		what = "a " + displayName(objType)
	}
	switch r.off {
	case -1:
		p.Root = "the finalizer " + fnName + " set on " + what
		return nil, cursor{closure: true}
	case -2:
		p.Root = "the queued finalizer " + fnName + " of " + what
		return nil, cursor{typ: elem}
	}
	p.Root = fmt.Sprintf("%s at %#x, whose finalizer %s keeps what it points at", what, fz.obj, fnName)
	i := n.d.find(fz.obj)
	if i < 0 {
		return nil, cursor{}
	}
	o := &n.d.objects[i]
	if elem == nil {
		return []seg{{kind: segUnknown, n: r.off, size: o.size}}, cursor{}
	}
	p.Type = displayName(objType)
	b := n.d.buf[o.data+int(fz.obj-o.addr) : o.data+int(o.size)]
	segs, c, ok := n.locate(elem, b, r.off, false, 0)
	if !ok {
		return []seg{{kind: segUnknown, n: r.off, size: o.size}}, cursor{}
	}
	return segs, c
}
