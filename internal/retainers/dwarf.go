package retainers

import (
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"slices"
	"strings"
)

// The Go linker's own DWARF attributes (cmd/internal/dwarf).
const (
	attrGoKind          dwarf.Attr = 0x2900
	attrGoKey           dwarf.Attr = 0x2901
	attrGoElem          dwarf.Attr = 0x2902
	attrGoRuntimeType   dwarf.Attr = 0x2904
	attrGoClosureOffset dwarf.Attr = 0x2907
)

// Go kinds, as DW_AT_go_kind numbers them (reflect.Kind).
const (
	kindArray         = 17
	kindChan          = 18
	kindFunc          = 19
	kindInterface     = 20
	kindMap           = 21
	kindPointer       = 22
	kindSlice         = 23
	kindString        = 24
	kindStruct        = 25
	kindUnsafePointer = 26
)

// dtype is a type of the DWARF, reduced to what naming needs.
type dtype struct {
	off   dwarf.Offset
	tag   dwarf.Tag
	name  string
	size  int64
	kind  int64
	ref   dwarf.Offset // DW_AT_type: what a pointer points at, what a typedef names, an array's element
	elem  dwarf.Offset // DW_AT_go_elem
	key   dwarf.Offset // DW_AT_go_key
	count int64        // array length; -1 if unknown
	// fields are a struct's members, by offset.
	fields []dfield
}

type dfield struct {
	name string
	off  int64
	typ  dwarf.Offset
}

// global is a package variable the DWARF describes.
type global struct {
	name string
	addr uint64 // link time
	typ  dwarf.Offset
}

// dfunc is a function the DWARF describes; its variables are read when a
// frame or a closure of it is named.
type dfunc struct {
	name     string
	lowpc    uint64 // link time
	highpc   uint64
	off      dwarf.Offset
	addrBase uint64 // its unit's DW_AT_addr_base, for location lists
}

// dwarfInfo is the DWARF of the running executable, read once.
type dwarfInfo struct {
	data      *dwarf.Data
	types     map[dwarf.Offset]*dtype
	byRuntime map[uint64]dwarf.Offset // a runtime type's offset in its section → its DWARF type
	byName    map[string]dwarf.Offset
	globals   []global // sorted by address
	funcs     []dfunc  // sorted by lowpc
	loclists  []byte   // .debug_loclists (DWARF 5) or .debug_loc (DWARF 4)
	dwarf5    bool
	addr      []byte // .debug_addr
	// vars caches the variables of functions already read.
	vars map[dwarf.Offset][]dvar
}

// readDWARF reads what naming needs from f's DWARF in one pass over the
// compile units' top-level entries; functions' children are read later,
// for the functions a path goes through.
func readDWARF(f *elf.File) (*dwarfInfo, error) {
	data, err := f.DWARF()
	if err != nil {
		return nil, err
	}
	d := &dwarfInfo{data: data, types: make(map[dwarf.Offset]*dtype), byRuntime: make(map[uint64]dwarf.Offset),
		byName: make(map[string]dwarf.Offset), vars: make(map[dwarf.Offset][]dvar)}
	if s := f.Section(".debug_loclists"); s != nil {
		d.loclists, _ = s.Data()
		d.dwarf5 = true
	} else if s := f.Section(".debug_loc"); s != nil {
		d.loclists, _ = s.Data()
	}
	if s := f.Section(".debug_addr"); s != nil {
		d.addr, _ = s.Data()
	}
	r := data.Reader()
	var addrBase uint64
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			addrBase, _ = e.Val(dwarf.AttrAddrBase).(uint64)
			if base, ok := e.Val(dwarf.AttrAddrBase).(int64); ok {
				addrBase = uint64(base)
			}
			continue // its children are the entries this loop reads
		case dwarf.TagSubprogram:
			name, _ := e.Val(dwarf.AttrName).(string)
			lo, ok := e.Val(dwarf.AttrLowpc).(uint64)
			if ok && name != "" {
				fn := dfunc{name: name, lowpc: lo, off: e.Offset, addrBase: addrBase}
				switch hi := e.Val(dwarf.AttrHighpc).(type) {
				case uint64:
					fn.highpc = hi
				case int64:
					fn.highpc = lo + uint64(hi)
				}
				d.funcs = append(d.funcs, fn)
			}
		case dwarf.TagVariable:
			d.addGlobal(e)
		case dwarf.TagStructType:
			t := d.addType(e)
			if e.Children {
				if err := d.readMembers(r, t); err != nil {
					return nil, err
				}
				continue
			}
		case dwarf.TagArrayType:
			t := d.addType(e)
			if e.Children {
				if err := d.readSubrange(r, t); err != nil {
					return nil, err
				}
				continue
			}
		case dwarf.TagBaseType, dwarf.TagPointerType, dwarf.TagTypedef, dwarf.TagSubroutineType,
			dwarf.TagUnspecifiedType:
			d.addType(e)
		}
		if e.Children {
			r.SkipChildren()
		}
	}
	slices.SortFunc(d.globals, func(a, b global) int { return cmpU64(a.addr, b.addr) })
	slices.SortFunc(d.funcs, func(a, b dfunc) int { return cmpU64(a.lowpc, b.lowpc) })
	return d, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (d *dwarfInfo) addType(e *dwarf.Entry) *dtype {
	t := &dtype{off: e.Offset, tag: e.Tag, count: -1}
	t.name, _ = e.Val(dwarf.AttrName).(string)
	t.size, _ = e.Val(dwarf.AttrByteSize).(int64)
	t.kind, _ = e.Val(attrGoKind).(int64)
	t.ref, _ = e.Val(dwarf.AttrType).(dwarf.Offset)
	t.elem, _ = e.Val(attrGoElem).(dwarf.Offset)
	t.key, _ = e.Val(attrGoKey).(dwarf.Offset)
	if rt, ok := e.Val(attrGoRuntimeType).(uint64); ok && rt != 0 {
		if _, dup := d.byRuntime[rt]; !dup || e.Tag != dwarf.TagTypedef {
			d.byRuntime[rt] = e.Offset
		}
	}
	d.types[e.Offset] = t
	if t.name != "" {
		if _, dup := d.byName[t.name]; !dup || e.Tag != dwarf.TagTypedef {
			d.byName[t.name] = e.Offset
		}
	}
	if t.tag == dwarf.TagPointerType && t.size == 0 {
		t.size = 8
	}
	return t
}

func (d *dwarfInfo) readMembers(r *dwarf.Reader, t *dtype) error {
	return eachChild(r, func(e *dwarf.Entry) {
		if e.Tag == dwarf.TagMember {
			f := dfield{}
			f.name, _ = e.Val(dwarf.AttrName).(string)
			f.off, _ = e.Val(dwarf.AttrDataMemberLoc).(int64)
			f.typ, _ = e.Val(dwarf.AttrType).(dwarf.Offset)
			t.fields = append(t.fields, f)
		}
	})
}

func (d *dwarfInfo) readSubrange(r *dwarf.Reader, t *dtype) error {
	return eachChild(r, func(e *dwarf.Entry) {
		if e.Tag == dwarf.TagSubrangeType {
			if n, ok := e.Val(dwarf.AttrCount).(int64); ok {
				t.count = n
			} else if ub, ok := e.Val(dwarf.AttrUpperBound).(int64); ok {
				t.count = ub + 1
			}
		}
	})
}

// eachChild calls f for each child of the entry r has just read, skipping
// the children's own children.
func eachChild(r *dwarf.Reader, f func(*dwarf.Entry)) error {
	for {
		e, err := r.Next()
		if err != nil {
			return err
		}
		if e == nil || e.Tag == 0 {
			return nil
		}
		f(e)
		if e.Children {
			r.SkipChildren()
		}
	}
}

// addGlobal records a package variable: a top-level variable whose
// location is one DW_OP_addr.
func (d *dwarfInfo) addGlobal(e *dwarf.Entry) {
	name, _ := e.Val(dwarf.AttrName).(string)
	loc, _ := e.Val(dwarf.AttrLocation).([]byte)
	typ, _ := e.Val(dwarf.AttrType).(dwarf.Offset)
	if name == "" || len(loc) != 9 || loc[0] != opAddr {
		return
	}
	d.globals = append(d.globals, global{name: name, addr: binary.LittleEndian.Uint64(loc[1:]), typ: typ})
}

// typ returns the type at off; nil if the DWARF has none there.
func (d *dwarfInfo) typ(off dwarf.Offset) *dtype {
	if d == nil || off == 0 {
		return nil
	}
	return d.types[off]
}

// underlying follows typedefs to the type they name.
func (d *dwarfInfo) underlying(t *dtype) *dtype {
	for range 16 {
		if t == nil || t.tag != dwarf.TagTypedef {
			return t
		}
		next := d.typ(t.ref)
		if next == nil {
			return t
		}
		t = next
	}
	return t
}

// sizeOf returns a type's size in bytes; -1 if unknown.
func (d *dwarfInfo) sizeOf(t *dtype) int64 {
	for range 16 {
		if t == nil {
			return -1
		}
		if t.size > 0 || t.tag == dwarf.TagStructType || t.tag == dwarf.TagBaseType {
			return t.size
		}
		if t.tag == dwarf.TagArrayType {
			es := d.sizeOf(d.typ(t.ref))
			if es < 0 || t.count < 0 {
				return -1
			}
			return es * t.count
		}
		if t.tag != dwarf.TagTypedef {
			return t.size
		}
		t = d.typ(t.ref)
	}
	return -1
}

// runtimeType returns the DWARF type of the runtime type at off in the
// section that holds it: DW_AT_go_runtime_type is such an offset.
func (d *dwarfInfo) runtimeType(off uint64) *dtype {
	if d == nil {
		return nil
	}
	return d.typ(d.byRuntime[off])
}

// named returns the type called name.
func (d *dwarfInfo) named(name string) *dtype {
	if d == nil {
		return nil
	}
	return d.typ(d.byName[name])
}

// globalAt returns the package variable holding the link-time address
// addr, and its type.
func (d *dwarfInfo) globalAt(addr uint64) (global, *dtype, bool) {
	if d == nil {
		return global{}, nil, false
	}
	i, found := slices.BinarySearchFunc(d.globals, addr, func(g global, a uint64) int { return cmpU64(g.addr, a) })
	if !found {
		i--
	}
	if i < 0 {
		return global{}, nil, false
	}
	g := d.globals[i]
	t := d.typ(g.typ)
	size := d.sizeOf(t)
	if size <= 0 {
		size = 1
	}
	if addr >= g.addr+uint64(size) {
		return global{}, nil, false
	}
	return g, t, true
}

// funcAt returns the function whose code holds the link-time pc.
func (d *dwarfInfo) funcAt(pc uint64) (dfunc, bool) {
	if d == nil {
		return dfunc{}, false
	}
	i, found := slices.BinarySearchFunc(d.funcs, pc, func(f dfunc, p uint64) int { return cmpU64(f.lowpc, p) })
	if !found {
		i--
	}
	if i < 0 || pc >= d.funcs[i].highpc {
		return dfunc{}, false
	}
	return d.funcs[i], true
}

// funcEntry returns the link-time entry of the function called name.
func (d *dwarfInfo) funcEntry(name string) (uint64, bool) {
	for _, f := range d.funcs {
		if f.name == name {
			return f.lowpc, true
		}
	}
	return 0, false
}

// dvar is a variable or parameter of a function, or of a function inlined
// into it.
type dvar struct {
	name string
	typ  dwarf.Offset
	// loc is an expression location; list, when loc is nil, is the
	// offset of a location list.
	loc     []byte
	list    int64
	hasList bool
	// closureOff is the offset of a captured variable in its closure's
	// context; -1 for other variables.
	closureOff int64
	// inlined names the function the variable belongs to when it is
	// inlined into the frame's; ranges are where that inlined body runs
	// (link time). Empty for the frame's own variables.
	inlined string
	ranges  [][2]uint64
	// param says it is a parameter.
	param bool
}

// varsOf reads the variables of the function at off, those of blocks and of
// inlined calls included.
func (d *dwarfInfo) varsOf(fn dfunc) []dvar {
	if vs, ok := d.vars[fn.off]; ok {
		return vs
	}
	var vs []dvar
	r := d.data.Reader()
	r.Seek(fn.off)
	if e, err := r.Next(); err == nil && e != nil && e.Children {
		vs = d.readVars(r, "", nil, 0)
	}
	d.vars[fn.off] = vs
	return vs
}

// readVars reads the children of the entry r is in, to its end.
func (d *dwarfInfo) readVars(r *dwarf.Reader, inlined string, ranges [][2]uint64, depth int) []dvar {
	var vs []dvar
	for {
		e, err := r.Next()
		if err != nil || e == nil || e.Tag == 0 {
			return vs
		}
		switch e.Tag {
		case dwarf.TagVariable, dwarf.TagFormalParameter:
			v := dvar{closureOff: -1, inlined: inlined, ranges: ranges, param: e.Tag == dwarf.TagFormalParameter}
			v.name, _ = e.Val(dwarf.AttrName).(string)
			v.typ, _ = e.Val(dwarf.AttrType).(dwarf.Offset)
			if origin, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset); ok {
				oname, otyp := d.origin(origin)
				if v.name == "" {
					v.name = oname
				}
				if v.typ == 0 {
					v.typ = otyp
				}
			}
			switch loc := e.Val(dwarf.AttrLocation).(type) {
			case []byte:
				v.loc = loc
			case int64:
				v.list, v.hasList = loc, true
			}
			if co, ok := e.Val(attrGoClosureOffset).(int64); ok {
				v.closureOff = co
			}
			vs = append(vs, v)
		case dwarf.TagInlinedSubroutine:
			if depth < 8 && e.Children {
				name := ""
				if origin, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset); ok {
					name, _ = d.origin(origin)
				}
				rs, _ := d.data.Ranges(e)
				vs = append(vs, d.readVars(r, name, rs, depth+1)...)
				continue
			}
		case dwarf.TagLexDwarfBlock:
			if e.Children {
				vs = append(vs, d.readVars(r, inlined, ranges, depth)...)
				continue
			}
		}
		if e.Children {
			r.SkipChildren()
		}
	}
}

// callLine returns the line of fn, at the link-time pc, of the outermost
// call inlined there (DW_AT_call_line): where fn's own code is when its pc
// lies in an inlined body, such as sync.Mutex.Lock's fast path. false when
// no call is inlined at pc.
func (d *dwarfInfo) callLine(fn dfunc, pc uint64) (int64, bool) {
	if d == nil {
		return 0, false
	}
	r := d.data.Reader()
	r.Seek(fn.off)
	if e, err := r.Next(); err != nil || e == nil || !e.Children {
		return 0, false
	}
	for depth := 1; depth > 0; {
		e, err := r.Next()
		if err != nil || e == nil {
			return 0, false
		}
		if e.Tag == 0 {
			depth--
			continue
		}
		switch e.Tag {
		case dwarf.TagInlinedSubroutine:
			if rs, err := d.data.Ranges(e); err == nil && len(rs) > 0 && inRanges(rs, pc) {
				line, ok := e.Val(dwarf.AttrCallLine).(int64)
				return line, ok
			}
		case dwarf.TagLexDwarfBlock:
			if e.Children {
				depth++ // a block's inlined calls are fn's too
				continue
			}
		}
		if e.Children {
			r.SkipChildren()
		}
	}
	return 0, false
}

// origin returns the name and type of an abstract entry.
func (d *dwarfInfo) origin(off dwarf.Offset) (string, dwarf.Offset) {
	r := d.data.Reader()
	r.Seek(off)
	e, err := r.Next()
	if err != nil || e == nil {
		return "", 0
	}
	name, _ := e.Val(dwarf.AttrName).(string)
	typ, _ := e.Val(dwarf.AttrType).(dwarf.Offset)
	return name, typ
}

// closureVars returns the captured variables of the function whose entry is
// the link-time pc, by their offset in the closure's context.
func (d *dwarfInfo) closureVars(entry uint64) []dvar {
	fn, ok := d.funcAt(entry)
	if !ok || fn.lowpc != entry {
		return nil
	}
	var out []dvar
	for _, v := range d.varsOf(fn) {
		if v.closureOff >= 0 && v.inlined == "" {
			out = append(out, v)
		}
	}
	return out
}

// inRanges reports whether pc lies in one of rs; an empty rs holds every pc.
func inRanges(rs [][2]uint64, pc uint64) bool {
	if len(rs) == 0 {
		return true
	}
	for _, r := range rs {
		if r[0] <= pc && pc < r[1] {
			return true
		}
	}
	return false
}

// displayName is a type's name as a report prints it: Go's own spelling,
// without the linker's prefixes.
func displayName(t *dtype) string {
	if t == nil {
		return ""
	}
	return shortTypeName(strings.TrimPrefix(t.name, "noalg."))
}

// shortTypeName drops the directories of the import paths in a type's name,
// as reflect does: "map[string]*github.com/acme/infer.entry" becomes
// "map[string]*infer.entry".
func shortTypeName(s string) string {
	var b strings.Builder
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		word := s[start:end]
		if i := strings.LastIndexByte(word, '/'); i >= 0 {
			word = word[i+1:]
		}
		b.WriteString(word)
		start = -1
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '/' || c == '.' || c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 {
			if start < 0 {
				start = i
			}
			continue
		}
		flush(i)
		b.WriteByte(c)
	}
	flush(len(s))
	return b.String()
}
