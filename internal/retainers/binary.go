package retainers

import (
	"debug/elf"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
)

// RerunHint is the flag that makes a test binary carry the symbol table and
// the DWARF that name package variables, types, fields, map keys, closure
// variables and frame locals: `go test` and `go run` link with -s -w unless
// told otherwise (a binary from `go test -c` or `go build` has both).
const RerunHint = "go test -ldflags='-s=false -w=false'"

// binaryInfo is what the running executable says about itself: its data
// symbols from the ELF symbol table, its DWARF, and the offset between the
// addresses they are linked at and the addresses they run at.
type binaryInfo struct {
	// slide is added to a link-time address to get the run-time one: zero
	// for a binary that is not position-independent.
	slide   uint64
	symbols []symbol // data symbols, sorted by address (run time)
	dw      *dwarfInfo
	// missing says what could not be read, for the report's note.
	missing []string
	file    *elf.File // open until close; nil if the executable was not read
	// mem is /proc/self/mem, opened the first time static data is read;
	// memFailed says it could not be.
	mem       *os.File
	memFailed bool
	// sections are the allocated sections, by link-time address: a
	// runtime type is named by its offset in the one that holds it.
	sections []*elf.Section
}

// sectionOffset returns the offset of the run-time address addr in the
// section that holds it.
func (b *binaryInfo) sectionOffset(addr uint64) (uint64, bool) {
	link := addr - b.slide
	for _, s := range b.sections {
		if link >= s.Addr && link < s.Addr+s.Size {
			return link - s.Addr, true
		}
	}
	return 0, false
}

// close closes the executable.
func (b *binaryInfo) close() {
	if b.file != nil {
		_ = b.file.Close()
		b.file = nil
	}
	if b.mem != nil {
		_ = b.mem.Close()
		b.mem = nil
	}
}

// symbol is one data symbol: a package variable, or the runtime's own.
type symbol struct {
	name string
	addr uint64 // run time
	size uint64
}

// anchor is a function whose run-time address the namer compares with its
// link-time address (in the symbol table or the DWARF) to find the slide of
// a position-independent executable.
//
//go:noinline
func anchor() int { return 1 }

// anchorName is anchor's symbol name.
const anchorName = "github.com/tensorlife/tensorlife/internal/retainers.anchor"

// dataSections are the sections whose symbols can be package variables.
var dataSections = []string{".data", ".bss", ".noptrdata", ".noptrbss"}

// openBinary reads the running executable. It never fails: what it cannot
// read it leaves out, and says so in missing.
func openBinary() *binaryInfo {
	b := &binaryInfo{}
	path, err := os.Executable()
	if err != nil {
		b.missing = append(b.missing, "executable to read ("+err.Error()+")")
		return b
	}
	f, err := elf.Open(path)
	if err != nil {
		b.missing = append(b.missing, "ELF executable ("+err.Error()+")")
		return b
	}
	b.file = f
	anchorPC := uint64(reflect.ValueOf(anchor).Pointer())

	syms, err := f.Symbols()
	haveSymbols := err == nil && len(syms) > 0
	slideKnown := false
	if haveSymbols {
		for _, s := range syms {
			if s.Name == anchorName && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
				b.slide, slideKnown = anchorPC-s.Value, true
				break
			}
		}
		if !slideKnown {
			b.missing = append(b.missing, "symbol for "+anchorName)
		}
	} else {
		b.missing = append(b.missing, "symbol table")
	}

	dw, err := readDWARF(f)
	switch {
	case err != nil:
		b.missing = append(b.missing, "DWARF")
	default:
		if !slideKnown {
			if lo, ok := dw.funcEntry(anchorName); ok {
				b.slide, slideKnown = anchorPC-lo, true
			}
		}
		if slideKnown {
			b.dw = dw
		} else {
			b.missing = append(b.missing, "DWARF for "+anchorName)
		}
	}
	if haveSymbols && slideKnown {
		b.symbols = dataSymbols(f, syms, b.slide)
	}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Addr != 0 {
			b.sections = append(b.sections, s)
		}
	}
	return b
}

// dataSymbols returns the object symbols of the data sections, at their
// run-time addresses, sorted.
func dataSymbols(f *elf.File, syms []elf.Symbol, slide uint64) []symbol {
	inData := make(map[elf.SectionIndex]bool)
	for i, s := range f.Sections {
		if slices.Contains(dataSections, s.Name) {
			inData[elf.SectionIndex(i)] = true
		}
	}
	var out []symbol
	for _, s := range syms {
		if !inData[s.Section] || elf.ST_TYPE(s.Info) != elf.STT_OBJECT || s.Name == "" {
			continue
		}
		out = append(out, symbol{name: s.Name, addr: s.Value + slide, size: s.Size})
	}
	slices.SortFunc(out, func(a, b symbol) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// symbolAt returns the data symbol holding addr.
func (b *binaryInfo) symbolAt(addr uint64) (symbol, bool) {
	i, found := slices.BinarySearchFunc(b.symbols, addr, func(s symbol, a uint64) int {
		switch {
		case s.addr < a:
			return -1
		case s.addr > a:
			return 1
		}
		return 0
	})
	if !found {
		i-- // the last symbol starting before addr
	}
	for ; i >= 0 && i < len(b.symbols); i-- {
		s := b.symbols[i]
		if s.addr <= addr && addr < s.addr+max(s.size, 1) {
			return s, true
		}
		if s.addr+s.size <= addr && s.size > 0 {
			break
		}
	}
	return symbol{}, false
}

// readStatic reads n bytes of static data at the run-time address addr,
// which must lie in one of the executable's allocated sections: string
// literals and the values boxed in interfaces at compile time live there.
// The process's own memory is read where it can be (/proc/self/mem), since
// a position-independent binary's file holds its relocated data unrelocated;
// the file's section otherwise.
func (b *binaryInfo) readStatic(addr, n uint64) ([]byte, bool) {
	if n > maxKeyBytes || n == 0 {
		return nil, false
	}
	link := addr - b.slide
	for _, s := range b.sections {
		if link < s.Addr || link+n > s.Addr+s.Size {
			continue
		}
		buf := make([]byte, n)
		if b.mem == nil && !b.memFailed {
			f, err := os.Open("/proc/self/mem")
			b.mem, b.memFailed = f, err != nil
		}
		if b.mem != nil {
			if _, err := b.mem.ReadAt(buf, int64(addr)); err == nil {
				return buf, true
			}
		}
		if s.Type == elf.SHT_NOBITS {
			return nil, false
		}
		if _, err := s.ReadAt(buf, int64(link-s.Addr)); err != nil {
			return nil, false
		}
		return buf, true
	}
	return nil, false
}

// complete reports whether both the symbol table and the DWARF were read.
func (b *binaryInfo) complete() bool { return len(b.missing) == 0 }

// note says what the binary lacked, and how to get it.
func (b *binaryInfo) note() string {
	if b.complete() {
		return ""
	}
	return fmt.Sprintf("the test binary has no %s (go test links with -s -w), so package variables, types, "+
		"fields, map keys, closure variables and frame locals are not named; rerun with %s",
		strings.Join(b.missing, " and no "), RerunHint)
}
