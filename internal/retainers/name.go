package retainers

import (
	"debug/dwarf"
	"encoding/binary"
	"fmt"
	"runtime"
	"strconv"
	"strings"
)

// segKind is the kind of one step of a path's expression.
type segKind uint8

const (
	segField   segKind = iota // .name
	segIndex                  // [i]
	segKey                    // ["key"]: a map's value
	segMapKey                 // {key k}: a map's key itself
	segAssert                 // .(T): an interface's dynamic value
	segBuffer                 // a value buffered in a channel
	segLoad                   // .Load(): what an atomic pointer holds
	segLoadKey                // .Load(key): a sync.Map's value
	segClosure                // → closure F: its captured variable follows
	segMethod                 // → method value F: its receiver follows
	segCapture                // captured variable name
	segUnknown                // → an object whose type is not known, and the offset of the pointer
	segStack                  // → an object on the stack, and the offset of the pointer
)

// seg is one step of a path's expression.
type seg struct {
	kind segKind
	text string
	n    int64
	size uint64 // segUnknown: the object's size
}

// cursor is what the namer knows about the place a pointer lands on.
type cursor struct {
	typ *dtype // the static type there; nil if unknown
	// array: the place is the first element of an array of typ (a slice's
	// backing array, a map's groups).
	array bool
	// closure: the place is a function value's closure.
	closure bool
	// mapInternal: the place is inside a map's directory, tables or
	// groups, whose steps the expression leaves out until a slot.
	mapInternal bool
	// chanElem is the element type of the channel whose hchan this is.
	chanElem *dtype
}

// namer turns a chain into words.
type namer struct {
	d   *heapDump
	bin *binaryInfo
	dw  *dwarfInfo
	// funcName names the function at a run-time pc; it is
	// runtime.FuncForPC in the process that wrote the dump.
	funcName func(pc uint64) (name string, entry uint64, ok bool)
}

// maxKeyBytes bounds the bytes of a map key a report quotes.
const maxKeyBytes = 256

// typeAt returns the DWARF type of the runtime type at the run-time
// address addr; nil if unknown.
func (n *namer) typeAt(addr uint64) *dtype {
	if n.dw == nil || addr == 0 {
		return nil
	}
	off, ok := n.bin.sectionOffset(addr)
	if !ok {
		return nil
	}
	return n.dw.runtimeType(off)
}

// kindOf returns the Go kind of t: the first one along its typedefs.
func (n *namer) kindOf(t *dtype) int64 {
	for range 16 {
		if t == nil {
			return 0
		}
		if t.kind != 0 {
			return t.kind
		}
		if t.tag != dwarf.TagTypedef {
			return 0
		}
		t = n.dw.typ(t.ref)
	}
	return 0
}

// word reads the pointer-sized word at off of b.
func word(b []byte, off int64) (uint64, bool) {
	if off < 0 || off+8 > int64(len(b)) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[off:]), true
}

// locate names the path from the start of a value of type t, whose bytes
// are b (as far as known), to the pointer at rel bytes into it, and says
// where that pointer lands. ok is false where the layout is not known.
func (n *namer) locate(t *dtype, b []byte, rel int64, inMap bool, depth int) (segs []seg, next cursor, ok bool) {
	if t == nil || depth > 64 || rel < 0 {
		return nil, cursor{}, false
	}
	kind := n.kindOf(t)
	u := n.dw.underlying(t)
	switch kind {
	case kindMap:
		if rel != 0 {
			return nil, cursor{}, false
		}
		if p := n.dw.underlying(u); p != nil && p.tag == dwarf.TagPointerType {
			return nil, cursor{typ: n.dw.typ(p.ref)}, true
		}
		return nil, cursor{}, true
	case kindChan:
		if rel != 0 {
			return nil, cursor{}, false
		}
		next := cursor{chanElem: n.dw.typ(t.elem)}
		for c := t; c != nil && next.chanElem == nil && c.tag == dwarf.TagTypedef; c = n.dw.typ(c.ref) {
			next.chanElem = n.dw.typ(c.elem)
		}
		if u != nil && u.tag == dwarf.TagPointerType {
			next.typ = n.dw.typ(u.ref)
		}
		return nil, next, true
	case kindFunc:
		if rel != 0 {
			return nil, cursor{}, false
		}
		return nil, cursor{closure: true}, true
	case kindInterface:
		return n.locateInterface(u, b, rel, inMap, depth)
	case kindSlice:
		if rel != 0 {
			return nil, cursor{}, false
		}
		return nil, cursor{typ: n.sliceElem(t, u), array: true, mapInternal: inMap}, true
	case kindString:
		return nil, cursor{}, rel == 0
	}
	if u == nil {
		return nil, cursor{}, false
	}
	switch u.tag {
	case dwarf.TagPointerType:
		if rel != 0 {
			return nil, cursor{}, false
		}
		return nil, cursor{typ: n.dw.typ(u.ref), mapInternal: inMap}, true
	case dwarf.TagSubroutineType:
		return nil, cursor{closure: true}, rel == 0
	case dwarf.TagArrayType:
		elem := n.dw.typ(u.ref)
		es := n.dw.sizeOf(elem)
		if es <= 0 {
			return nil, cursor{}, false
		}
		i := rel / es
		if u.count >= 0 && i >= u.count {
			return nil, cursor{}, false
		}
		rest, next, ok := n.locate(elem, sub(b, i*es), rel-i*es, inMap, depth+1)
		if inMap {
			return rest, next, ok
		}
		return append([]seg{{kind: segIndex, n: i}}, rest...), next, ok
	case dwarf.TagStructType:
		return n.locateStruct(u, b, rel, inMap, depth)
	}
	return nil, cursor{}, false
}

// sliceElem returns a slice type's element type.
func (n *namer) sliceElem(t, u *dtype) *dtype {
	for c := t; c != nil; c = n.dw.typ(c.ref) {
		if c.elem != 0 {
			return n.dw.typ(c.elem)
		}
		if c.tag != dwarf.TagTypedef {
			break
		}
	}
	if u != nil && len(u.fields) > 0 { // the array field is a pointer to the element
		if p := n.dw.underlying(n.dw.typ(u.fields[0].typ)); p != nil && p.tag == dwarf.TagPointerType {
			return n.dw.typ(p.ref)
		}
	}
	return nil
}

// sub returns b from off, or nil.
func sub(b []byte, off int64) []byte {
	if off < 0 || off > int64(len(b)) {
		return nil
	}
	return b[off:]
}

// locateInterface names the pointer in an interface value: its data word,
// whose target's type is the dynamic type.
func (n *namer) locateInterface(u *dtype, b []byte, rel int64, inMap bool, depth int) ([]seg, cursor, bool) {
	if rel != 8 {
		return nil, cursor{}, false
	}
	w, ok := word(b, 0)
	if !ok || w == 0 {
		return []seg{{kind: segAssert, text: "?"}}, cursor{}, true
	}
	typeAddr := w
	if u != nil && len(u.fields) > 0 && u.fields[0].name == "tab" {
		typeAddr, ok = n.d.itabs[w]
		if !ok {
			return []seg{{kind: segAssert, text: "?"}}, cursor{}, true
		}
	}
	dyn := n.typeAt(typeAddr)
	name := displayName(dyn)
	if name == "" {
		name = n.d.typeNames[typeAddr]
	}
	if dyn == nil {
		if name == "" {
			name = "?"
		}
		return []seg{{kind: segAssert, text: name}}, cursor{}, true
	}
	s := []seg{{kind: segAssert, text: name}}
	if n.pointerShaped(dyn) {
		// Stored directly: the data word is the dynamic value.
		rest, next, ok := n.locate(dyn, nil, 0, inMap, depth+1)
		return append(s, rest...), next, ok
	}
	return s, cursor{typ: dyn, mapInternal: inMap}, true
}

// pointerShaped reports whether an interface holds a value of type t in its
// data word rather than pointing at a copy.
func (n *namer) pointerShaped(t *dtype) bool {
	for range 16 {
		switch n.kindOf(t) {
		case kindPointer, kindChan, kindMap, kindFunc, kindUnsafePointer:
			return true
		}
		u := n.dw.underlying(t)
		switch {
		case u == nil:
			return false
		case u.tag == dwarf.TagPointerType:
			return true
		case u.tag == dwarf.TagStructType && len(u.fields) == 1 && n.kindOf(u) == kindStruct:
			t = n.dw.typ(u.fields[0].typ) // a struct of one pointer is one
		case u.tag == dwarf.TagArrayType && u.count == 1:
			t = n.dw.typ(u.ref)
		default:
			return false
		}
	}
	return false
}

// locateStruct names a field path, with the runtime's structures told
// apart by the names the linker gives them.
func (n *namer) locateStruct(u *dtype, b []byte, rel int64, inMap bool, depth int) ([]seg, cursor, bool) {
	field := func(name string) (dfield, bool) {
		for _, f := range u.fields {
			if f.name == name {
				return f, true
			}
		}
		return dfield{}, false
	}
	switch {
	case strings.HasPrefix(u.name, "map<"):
		return n.locateMapHeader(u, b, rel)
	case strings.HasPrefix(u.name, "table<"):
		g, ok := field("groups")
		if !ok || rel != g.off {
			return nil, cursor{}, false
		}
		return nil, cursor{typ: n.groupOf(n.dw.typ(g.typ)), array: true, mapInternal: true}, true
	case strings.HasPrefix(u.name, "noalg.map.group[") || strings.HasPrefix(u.name, "map.group["):
		return n.locateSlot(u, b, rel, depth)
	case strings.HasPrefix(u.name, "hchan<"):
		buf, ok := field("buf")
		if !ok || rel != buf.off {
			break
		}
		return []seg{{kind: segBuffer}}, cursor{typ: n.chanElemOf(u, b), array: true}, true
	case u.name == "sync.Map":
		// Its one field is the trie; the path reads as m.Load(key).
		if m, ok := field("m"); ok {
			return n.locate(n.dw.typ(m.typ), sub(b, m.off), rel-m.off, true, depth+1)
		}
	case strings.HasPrefix(u.name, "internal/sync.node["):
		return n.locateTrieNode(u, b, rel, depth)
	case strings.HasPrefix(u.name, "internal/sync.entry["):
		return n.locateTrieEntry(u, b, rel, depth)
	case strings.HasPrefix(u.name, "sync/atomic.Pointer["):
		v, ok := field("v")
		if !ok || rel != v.off {
			break
		}
		var elem *dtype
		if f, ok := field("_"); ok { // _ [0]*T carries T
			if a := n.dw.underlying(n.dw.typ(f.typ)); a != nil && a.tag == dwarf.TagArrayType {
				if p := n.dw.underlying(n.dw.typ(a.ref)); p != nil && p.tag == dwarf.TagPointerType {
					elem = n.dw.typ(p.ref)
				}
			}
		}
		if inMap {
			return nil, cursor{typ: elem, mapInternal: true}, true
		}
		return []seg{{kind: segLoad}}, cursor{typ: elem}, true
	}
	for _, f := range u.fields {
		ft := n.dw.typ(f.typ)
		size := n.dw.sizeOf(ft)
		if size <= 0 || rel < f.off || rel >= f.off+size {
			continue
		}
		rest, next, ok := n.locate(ft, sub(b, f.off), rel-f.off, inMap, depth+1)
		if inMap {
			return rest, next, ok
		}
		return append([]seg{{kind: segField, text: f.name}}, rest...), next, ok
	}
	return nil, cursor{}, false
}

// step names the pointer at off of object o, reached at land (the pointer
// that led there minus the object's address), from what c says of that
// place.
func (n *namer) step(c cursor, o *object, land uint64, off uint64) ([]seg, cursor) {
	b := n.d.buf[o.data : o.data+int(o.size)]
	unknown := func() ([]seg, cursor) {
		return []seg{{kind: segUnknown, n: int64(off), size: o.size}}, cursor{}
	}
	if c.typ == nil && !c.closure && land == 0 {
		// No type: a closure still says what it is, by its code pointer.
		if w, ok := word(b, 0); ok {
			if _, entry, ok := n.funcName(w); ok && entry == w {
				c.closure = true
			}
		}
	}
	if c.closure {
		return n.stepClosure(b, land, off, o)
	}
	if c.typ == nil {
		return unknown()
	}
	rel := int64(off) - int64(land)
	if u := n.dw.underlying(c.typ); u != nil && strings.HasPrefix(u.name, "internal/sync.node[") {
		// A trie node heads a larger entry or indirect node.
		if t := n.trieNodeType(u, sub(b, int64(land))); t != nil {
			c.typ = t
		}
	}
	size := n.dw.sizeOf(c.typ)
	if rel < 0 || size <= 0 {
		return unknown()
	}
	var segs []seg
	base := int64(land)
	if rel >= size && !c.array {
		return unknown()
	}
	if c.array {
		i := rel / size
		if !c.mapInternal {
			segs = append(segs, seg{kind: segIndex, n: i})
		}
		base += i * size
		rel -= i * size
	}
	rest, next, ok := n.locate(c.typ, sub(b, base), rel, c.mapInternal, 0)
	if !ok {
		return unknown()
	}
	return append(segs, rest...), next
}

// stepClosure names the captured variable of a closure that holds the
// pointer at off.
func (n *namer) stepClosure(b []byte, land, off uint64, o *object) ([]seg, cursor) {
	code, _ := word(b, int64(land))
	name, entry, ok := n.funcName(code)
	if !ok {
		return []seg{{kind: segUnknown, n: int64(off), size: o.size}}, cursor{}
	}
	rel := int64(off - land)
	if method, ok := strings.CutSuffix(name, "-fm"); ok {
		return n.stepMethodValue(b, land, rel, o, method)
	}
	segs := []seg{{kind: segClosure, text: name}}
	if n.dw != nil {
		for _, v := range n.dw.closureVars(entry - n.bin.slide) {
			vt := n.dw.typ(v.typ)
			size := n.dw.sizeOf(vt)
			if size <= 0 || rel < v.closureOff || rel >= v.closureOff+size {
				continue
			}
			name := strings.TrimPrefix(v.name, "&")
			rest, next, ok := n.locate(vt, sub(b, int64(land)+v.closureOff), rel-v.closureOff, false, 0)
			segs = append(segs, seg{kind: segCapture, text: name})
			if !ok {
				return segs, cursor{}
			}
			return append(segs, rest...), next
		}
	}
	segs[0].n, segs[0].size = rel, o.size // no name for the captured variable: its offset
	return segs, cursor{}
}

// stepMethodValue names the receiver field that holds the pointer rel
// bytes into a method value's closure: the compiler's wrapper (method
// plus "-fm") keeps the receiver right after its code pointer, typed as
// the method's receiver parameter, so the path goes on into the receiver
// as into any variable, "→ method value (*T).M, receiver w.items[1]".
func (n *namer) stepMethodValue(b []byte, land uint64, rel int64, o *object, method string) ([]seg, cursor) {
	segs := []seg{{kind: segMethod, text: method}}
	const recvOff = 8 // after the code pointer
	if n.dw != nil && rel >= recvOff {
		if entry, ok := n.dw.funcEntry(method); ok {
			if fn, ok := n.dw.funcAt(entry); ok {
				for _, v := range n.dw.varsOf(fn) {
					if !v.param || v.inlined != "" {
						continue
					}
					vt := n.dw.typ(v.typ)
					if size := n.dw.sizeOf(vt); size <= 0 || rel >= recvOff+size {
						break
					}
					segs = append(segs, seg{kind: segCapture, text: v.name})
					rest, next, ok := n.locate(vt, sub(b, int64(land)+recvOff), rel-recvOff, false, 0)
					if !ok {
						return segs, cursor{}
					}
					return append(segs, rest...), next
				}
			}
		}
	}
	segs[0].n, segs[0].size = rel, o.size // no name for the receiver: its offset
	return segs, cursor{}
}

// render joins segments into the expression a report prints.
func render(segs []seg) string {
	var b strings.Builder
	for i := 0; i < len(segs); i++ {
		s := segs[i]
		switch s.kind {
		case segField:
			b.WriteString("." + s.text)
		case segIndex:
			fmt.Fprintf(&b, "[%d]", s.n)
		case segKey:
			b.WriteString("[" + s.text + "]")
		case segMapKey:
			b.WriteString("{key " + s.text + "}")
		case segAssert:
			b.WriteString(".(" + s.text + ")")
		case segBuffer:
			b.WriteString(" (channel buffer)")
		case segLoad:
			b.WriteString(".Load()")
		case segLoadKey:
			b.WriteString(".Load(" + s.text + ")")
		case segClosure:
			b.WriteString(" → closure " + s.text)
			if s.size > 0 {
				fmt.Fprintf(&b, " (%d B, captured word +%d)", s.size, s.n)
			}
		case segMethod:
			b.WriteString(" → method value " + s.text)
			if s.size > 0 {
				fmt.Fprintf(&b, " (%d B, receiver word +%d)", s.size, s.n)
			}
		case segCapture:
			if i > 0 && segs[i-1].kind == segMethod {
				b.WriteString(", receiver " + s.text)
				break
			}
			b.WriteString(", captured " + s.text)
		case segStack:
			fmt.Fprintf(&b, " → stack-allocated object +%d", s.n)
		case segUnknown:
			// Runs of objects of unknown type read as one step.
			j := i
			var sizes []string
			for j < len(segs) && segs[j].kind == segUnknown {
				sizes = append(sizes, fmt.Sprintf("%d B +%d", segs[j].size, segs[j].n))
				j++
			}
			if len(sizes) == 1 {
				b.WriteString(" → object (" + sizes[0] + ")")
			} else {
				b.WriteString(" → " + strconv.Itoa(len(sizes)) + " objects (" + strings.Join(sizes, ", ") + ")")
			}
			i = j - 1
		}
	}
	return b.String()
}

// runtimeFuncName names the function at pc in this process.
func runtimeFuncName(pc uint64) (string, uint64, bool) {
	f := runtime.FuncForPC(uintptr(pc))
	if f == nil {
		return "", 0, false
	}
	return f.Name(), uint64(f.Entry()), true
}

// fileLine returns the file:line of pc in this process, the base name of the
// file only; outer says pc is a return address (not the innermost frame).
// Where calls were inlined at pc, the line is the one in fn, the function
// the frame is named by: a goroutine parked in an inlined sync.Mutex.Lock
// is at its own line, not at mutex.go's. Without a frame of fn there, it
// is the innermost call's.
func fileLine(pc uint64, outer bool, fn string) string {
	if !outer {
		pc++ // CallersFrames takes return addresses, and steps back one
	}
	frames := runtime.CallersFrames([]uintptr{uintptr(pc)})
	var file string
	var line int
	for first := true; ; first = false {
		fr, more := frames.Next()
		if fr.Function == "" {
			break
		}
		if first || fr.Function == fn {
			file, line = fr.File, fr.Line
		}
		if fr.Function == fn || !more {
			break
		}
	}
	if file == "" {
		return ""
	}
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		file = file[i+1:]
	}
	return file + ":" + strconv.Itoa(line)
}
