package retainers

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// The records of a heap dump, as runtime/debug.WriteHeapDump writes them
// (the format is described at the top of runtime/heapdump.go and in the
// document it links, "go15heapdump"): a header line, then records, each a
// varint tag and its fields. Integers are unsigned varints; strings and
// memory ranges are a varint length and the bytes; a field list is pairs of
// varints (kind, offset) ending with kind 0.
const (
	tagEOF             = 0
	tagObject          = 1
	tagOtherRoot       = 2
	tagType            = 3
	tagGoroutine       = 4
	tagStackFrame      = 5
	tagParams          = 6
	tagFinalizer       = 7
	tagItab            = 8
	tagOSThread        = 9
	tagMemStats        = 10
	tagQueuedFinalizer = 11
	tagData            = 12
	tagBSS             = 13
	tagDefer           = 14
	tagPanic           = 15
	tagMemProf         = 16
	tagAllocSample     = 17

	fieldKindEol   = 0
	fieldKindPtr   = 1
	fieldKindIface = 2
	fieldKindEface = 3
)

// dumpHeader is the first line of every dump this parser reads.
const dumpHeader = "go1.7 heap dump\n"

// ErrMalformedDump means a heap dump could not be parsed: it was cut short,
// or a record is not one the format defines. A *DumpError says where.
var ErrMalformedDump = errors.New("retainers: malformed heap dump")

// DumpError is a heap dump that could not be parsed, with the byte offset
// and what was expected there. It matches ErrMalformedDump.
type DumpError struct {
	Offset int
	What   string
}

func (e *DumpError) Error() string {
	return fmt.Sprintf("retainers: malformed heap dump at byte %d: %s", e.Offset, e.What)
}

// Is reports whether target is ErrMalformedDump.
func (e *DumpError) Is(target error) bool { return target == ErrMalformedDump }

// object is one heap object of the dump. Its contents and its pointer
// fields stay in the dump's bytes: the parser keeps offsets only, so a dump
// costs its own size plus a few words per object.
type object struct {
	addr   uint64
	size   uint64
	data   int // offset of the contents in heapDump.buf
	fields int // offset of the field list in heapDump.buf
}

// segment is the data or bss segment of the main module.
type segment struct {
	name   string // "data" or "bss"
	addr   uint64
	size   uint64
	data   int
	fields int
}

// goroutine is a goroutine record and its frames, innermost first.
type goroutine struct {
	addr       uint64
	id         uint64
	gopc       uint64
	status     uint64
	system     bool
	waitReason string
	frames     []frame
}

// frame is one stack frame of a goroutine.
type frame struct {
	sp      uint64 // lowest address of the frame
	depth   uint64 // 0 for the innermost frame
	childSP uint64 // sp of the frame it called; 0 for the innermost
	size    uint64 // bytes from sp: the frame's top is sp+size (amd64: the CFA)
	data    int
	entry   uint64
	pc      uint64
	name    string
	fields  int
}

// finalizer is a finalizer record: set on obj (tagFinalizer) or queued to
// run (tagQueuedFinalizer).
type finalizer struct {
	obj  uint64
	fn   uint64 // the funcval: a root, it may be a closure
	code uint64 // fn's code pointer
	// objType is the address of the runtime type of the pointer to obj
	// that runtime.SetFinalizer was given.
	objType uint64
	queued  bool
}

// deferRecord is a deferred call of a goroutine.
type deferRecord struct {
	goroutine uint64
	fn        uint64
	code      uint64
}

// panicRecord is a panic in progress.
type panicRecord struct {
	goroutine uint64
	typ       uint64
	data      uint64
}

// otherRoot is a root the runtime names itself.
type otherRoot struct {
	what string
	addr uint64
}

// heapDump is a parsed dump: every record the search uses, with the
// contents of objects and frames left in buf.
type heapDump struct {
	buf        []byte
	bigEndian  bool
	ptrSize    uint64
	arch       string
	version    string
	objects    []object // sorted by address
	segments   []segment
	goroutines []goroutine
	finalizers []finalizer
	defers     []deferRecord
	panics     []panicRecord
	others     []otherRoot
	// itabs maps an itab's address to its type's address; typeNames maps
	// the types the dump describes (those of itabs) to their names.
	itabs     map[uint64]uint64
	typeNames map[uint64]string
}

// dumpReader reads the primitives of the format from a buffer.
type dumpReader struct {
	buf []byte
	off int
	err error
}

func (r *dumpReader) fail(what string) {
	if r.err == nil {
		r.err = &DumpError{Offset: r.off, What: what}
	}
}

func (r *dumpReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf[r.off:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.off += n
	return v
}

func (r *dumpReader) bool() bool { return r.uvarint() != 0 }

// bytes skips a length-prefixed range and returns its offset and length.
func (r *dumpReader) rangeOf() (off int, n uint64) {
	n = r.uvarint()
	if r.err != nil {
		return 0, 0
	}
	if n > uint64(len(r.buf)-r.off) {
		r.fail(fmt.Sprintf("range of %d bytes runs past the end", n))
		return 0, 0
	}
	off = r.off
	r.off += int(n)
	return off, n
}

func (r *dumpReader) string() string {
	off, n := r.rangeOf()
	return string(r.buf[off : off+int(n)])
}

// fieldList skips a field list and returns its offset.
func (r *dumpReader) fieldList() int {
	start := r.off
	for r.err == nil {
		kind := r.uvarint()
		if kind == fieldKindEol {
			break
		}
		if kind > fieldKindEface {
			r.fail(fmt.Sprintf("field kind %d", kind))
			break
		}
		r.uvarint() // offset
	}
	return start
}

// parseDump parses a whole dump held in buf. The result refers to buf.
func parseDump(buf []byte) (*heapDump, error) {
	if !bytes.HasPrefix(buf, []byte(dumpHeader)) {
		return nil, &DumpError{Offset: 0, What: "no " + fmt.Sprintf("%q", dumpHeader) + " header"}
	}
	d := &heapDump{buf: buf, ptrSize: 8, itabs: make(map[uint64]uint64), typeNames: make(map[uint64]string)}
	r := &dumpReader{buf: buf, off: len(dumpHeader)}
	var g *goroutine
	for r.err == nil {
		if r.off >= len(buf) {
			r.fail("no EOF record")
			break
		}
		tag := r.uvarint()
		switch tag {
		case tagEOF:
			return d.finish()
		case tagObject:
			o := object{addr: r.uvarint()}
			o.data, o.size = r.rangeOf()
			o.fields = r.fieldList()
			d.objects = append(d.objects, o)
		case tagOtherRoot:
			d.others = append(d.others, otherRoot{what: r.string(), addr: r.uvarint()})
		case tagType:
			addr := r.uvarint()
			r.uvarint() // size
			d.typeNames[addr] = r.string()
			r.bool() // pointers stored indirectly in interfaces
		case tagGoroutine:
			d.goroutines = append(d.goroutines, goroutine{addr: r.uvarint()})
			g = &d.goroutines[len(d.goroutines)-1]
			r.uvarint() // sp
			g.id = r.uvarint()
			g.gopc = r.uvarint()
			g.status = r.uvarint()
			g.system = r.bool()
			r.bool()    // background: always false
			r.uvarint() // wait since
			g.waitReason = r.string()
			r.uvarint() // scheduling context
			r.uvarint() // m
			r.uvarint() // defer
			r.uvarint() // panic
		case tagStackFrame:
			f := frame{sp: r.uvarint(), depth: r.uvarint(), childSP: r.uvarint()}
			f.data, f.size = r.rangeOf()
			f.entry = r.uvarint()
			f.pc = r.uvarint()
			r.uvarint() // continuation pc
			f.name = r.string()
			f.fields = r.fieldList()
			if g == nil {
				r.fail("stack frame before any goroutine")
				break
			}
			g.frames = append(g.frames, f)
		case tagParams:
			d.bigEndian = r.bool()
			d.ptrSize = r.uvarint()
			r.uvarint() // arena start
			r.uvarint() // arena end
			d.arch = r.string()
			d.version = r.string()
			r.uvarint() // CPUs
			if d.ptrSize != 8 && d.ptrSize != 4 {
				r.fail(fmt.Sprintf("pointer size %d", d.ptrSize))
			}
		case tagFinalizer, tagQueuedFinalizer:
			f := finalizer{obj: r.uvarint(), fn: r.uvarint(), code: r.uvarint(), queued: tag == tagQueuedFinalizer}
			r.uvarint() // fint
			f.objType = r.uvarint()
			d.finalizers = append(d.finalizers, f)
		case tagItab:
			addr := r.uvarint()
			d.itabs[addr] = r.uvarint()
		case tagOSThread:
			r.uvarint()
			r.uvarint()
			r.uvarint()
		case tagMemStats:
			for range 24 + 256 + 1 { // the MemStats fields the runtime writes
				r.uvarint()
			}
		case tagData, tagBSS:
			s := segment{name: "data", addr: r.uvarint()}
			if tag == tagBSS {
				s.name = "bss"
			}
			s.data, s.size = r.rangeOf()
			s.fields = r.fieldList()
			d.segments = append(d.segments, s)
		case tagDefer:
			r.uvarint() // the record
			rec := deferRecord{goroutine: r.uvarint()}
			r.uvarint() // sp
			r.uvarint() // pc
			rec.fn = r.uvarint()
			rec.code = r.uvarint()
			r.uvarint() // link
			d.defers = append(d.defers, rec)
		case tagPanic:
			r.uvarint() // the record
			p := panicRecord{goroutine: r.uvarint(), typ: r.uvarint(), data: r.uvarint()}
			r.uvarint() // unused
			r.uvarint() // link
			d.panics = append(d.panics, p)
		case tagMemProf:
			r.uvarint() // bucket
			r.uvarint() // size
			n := r.uvarint()
			if n > uint64(len(buf)) {
				r.fail("memory profile record with an impossible depth")
				break
			}
			for range n {
				r.string()  // function
				r.string()  // file
				r.uvarint() // line
			}
			r.uvarint() // allocs
			r.uvarint() // frees
		case tagAllocSample:
			r.uvarint()
			r.uvarint()
		default:
			r.fail(fmt.Sprintf("unknown record tag %d", tag))
		}
	}
	return nil, r.err
}

// finish sorts what the search looks up by address.
func (d *heapDump) finish() (*heapDump, error) {
	if d.bigEndian {
		return nil, &DumpError{Offset: 0, What: "big-endian dumps are not supported"}
	}
	slices.SortFunc(d.objects, func(a, b object) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		return 0
	})
	return d, nil
}

// find returns the index of the object holding addr, or -1.
func (d *heapDump) find(addr uint64) int {
	i, _ := slices.BinarySearchFunc(d.objects, addr, func(o object, a uint64) int {
		switch {
		case o.addr+o.size <= a:
			return -1
		case o.addr > a:
			return 1
		}
		return 0
	})
	if i < len(d.objects) && d.objects[i].addr <= addr && addr < d.objects[i].addr+d.objects[i].size {
		return i
	}
	return -1
}

// word reads the pointer-sized word at off in buf.
func (d *heapDump) word(off int) uint64 {
	if d.ptrSize == 4 {
		return uint64(binary.LittleEndian.Uint32(d.buf[off:]))
	}
	return binary.LittleEndian.Uint64(d.buf[off:])
}

// pointers calls yield with the offset of each pointer field of a field
// list, and the pointer it holds, read from the contents at data, until
// yield returns false. The list was checked when the dump was parsed.
func (d *heapDump) pointers(fields, data int, size uint64, yield func(off, ptr uint64) bool) {
	r := dumpReader{buf: d.buf, off: fields}
	for {
		kind := r.uvarint()
		if kind == fieldKindEol || r.err != nil {
			return
		}
		off := r.uvarint()
		if kind != fieldKindPtr {
			off += d.ptrSize // an interface's data word; its first word is not heap
		}
		if off+d.ptrSize > size {
			continue // a field past the contents: ignore it rather than read past
		}
		p := d.word(data + int(off))
		if p == 0 {
			continue
		}
		if !yield(off, p) {
			return
		}
	}
}

// bytesAt returns n bytes of the heap at addr when one object holds them
// all; nil otherwise.
func (d *heapDump) bytesAt(addr, n uint64) []byte {
	i := d.find(addr)
	if i < 0 {
		return nil
	}
	o := &d.objects[i]
	if addr+n > o.addr+o.size {
		return nil
	}
	start := o.data + int(addr-o.addr)
	return d.buf[start : start+int(n)]
}
