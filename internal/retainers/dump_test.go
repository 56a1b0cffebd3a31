package retainers

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dumpWriter writes a heap dump in the runtime's format, for tests that
// need a dump whose every record they know.
type dumpWriter struct{ b []byte }

func newDumpWriter() *dumpWriter {
	w := &dumpWriter{b: []byte(dumpHeader)}
	w.int(tagParams)
	w.int(0) // little-endian
	w.int(8)
	w.int(0x1000)
	w.int(0x100000)
	w.str("amd64")
	w.str("go1.26-test")
	w.int(2)
	return w
}

func (w *dumpWriter) int(v uint64)  { w.b = binary.AppendUvarint(w.b, v) }
func (w *dumpWriter) str(s string)  { w.int(uint64(len(s))); w.b = append(w.b, s...) }
func (w *dumpWriter) mem(b []byte)  { w.int(uint64(len(b))); w.b = append(w.b, b...) }
func (w *dumpWriter) bytes() []byte { w.int(tagEOF); return w.b }

func (w *dumpWriter) fields(offs []uint64) {
	for _, o := range offs {
		w.int(fieldKindPtr)
		w.int(o)
	}
	w.int(fieldKindEol)
}

// object writes a heap object of the given words, whose pointers are at
// the given word indices.
func (w *dumpWriter) object(addr uint64, contents []uint64, ptrWords ...int) {
	w.int(tagObject)
	w.int(addr)
	w.mem(words(contents...))
	w.fields(offsets(ptrWords))
}

// segment writes the data (or bss) segment.
func (w *dumpWriter) segment(tag, addr uint64, contents []uint64, ptrWords ...int) {
	w.int(tag)
	w.int(addr)
	w.mem(words(contents...))
	w.fields(offsets(ptrWords))
}

// goroutine writes a goroutine with one frame.
func (w *dumpWriter) goroutine(id uint64, reason, fn string, contents []uint64, ptrWords ...int) {
	w.int(tagGoroutine)
	w.int(0xa000 + id)
	w.int(0x9000) // sp
	w.int(id)
	w.int(0) // gopc
	w.int(4) // waiting
	w.int(0) // not a system goroutine
	w.int(0)
	w.int(0)
	w.str(reason)
	w.int(0)
	w.int(0)
	w.int(0)
	w.int(0)
	w.int(tagStackFrame)
	w.int(0x9000) // sp
	w.int(0)      // depth
	w.int(0)      // child sp
	w.mem(words(contents...))
	w.int(0x401000) // entry
	w.int(0x401010) // pc
	w.int(0x401010)
	w.str(fn)
	w.fields(offsets(ptrWords))
}

func words(vs ...uint64) []byte {
	b := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func offsets(ws []int) []uint64 {
	out := make([]uint64, len(ws))
	for i, w := range ws {
		out[i] = uint64(8 * w)
	}
	return out
}

func TestParseDumpSynthetic(t *testing.T) {
	w := newDumpWriter()
	w.object(0x3000, []uint64{7, 8})
	w.object(0x1000, []uint64{0x3000, 0}, 0)
	w.segment(tagData, 0x500, []uint64{0x1000, 9}, 0)
	w.goroutine(5, "chan receive", "main.worker", []uint64{0x3008}, 0)
	d, err := parseDump(w.bytes())
	require.NoError(t, err)

	assert.Equal(t, "go1.26-test", d.version)
	require.Len(t, d.objects, 2)
	assert.Equal(t, uint64(0x1000), d.objects[0].addr, "objects are sorted by address")
	assert.Equal(t, 1, d.find(0x3008), "an interior pointer finds its object")
	assert.Equal(t, -1, d.find(0x3010), "the end of an object is not in it")
	assert.Equal(t, -1, d.find(0x0fff))
	require.Len(t, d.segments, 1)
	assert.Equal(t, "data", d.segments[0].name)
	require.Len(t, d.goroutines, 1)
	g := d.goroutines[0]
	assert.Equal(t, uint64(5), g.id)
	assert.Equal(t, "chan receive", g.waitReason)
	require.Len(t, g.frames, 1)
	assert.Equal(t, "main.worker", g.frames[0].name)

	var ptrs []uint64
	o := d.objects[0]
	d.pointers(o.fields, o.data, o.size, func(off, p uint64) bool {
		ptrs = append(ptrs, off, p)
		return true
	})
	assert.Equal(t, []uint64{0, 0x3000}, ptrs)
}

func TestParseDumpMalformed(t *testing.T) {
	w := newDumpWriter()
	w.object(0x1000, []uint64{0x3000, 0}, 0)
	good := w.bytes()
	cases := map[string][]byte{
		"no header":      []byte("go1.4 heap dump\n"),
		"empty":          nil,
		"cut short":      good[:len(good)-5],
		"no EOF":         good[:len(good)-1],
		"unknown record": append(append([]byte(nil), good[:len(good)-1]...), 99),
		"range too long": append([]byte(dumpHeader), tagObject, 0x80, 0x20, 0xff, 0x7f),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseDump(b)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrMalformedDump), "%v", err)
		})
	}
}

// A real dump of this process holds this test's objects, byte for byte.
func TestParseDumpOfThisProcess(t *testing.T) {
	marker := bytes.Repeat([]byte("tensorlife"), 100)
	buf, pause, err := writeDump(Config{}.withDefaults())
	require.NoError(t, err)
	assert.Positive(t, pause)
	d, err := parseDump(buf)
	require.NoError(t, err)
	assert.Equal(t, uint64(8), d.ptrSize)
	assert.NotEmpty(t, d.version)

	addr := uint64(uintptr(unsafe.Pointer(&marker[0])))
	got := d.bytesAt(addr, uint64(len(marker)))
	assert.Equal(t, marker, got, "the dump holds the marker's bytes where it lives")

	names := make(map[string]bool)
	for _, s := range d.segments {
		names[s.name] = true
	}
	assert.Equal(t, map[string]bool{"data": true, "bss": true}, names)
	dumping := 0
	for _, g := range d.goroutines {
		if g.waitReason == "dumping heap" {
			dumping++
			require.NotEmpty(t, g.frames)
		}
	}
	assert.Equal(t, 1, dumping, "the goroutine that wrote the dump is in it, waiting")
	assert.NotEmpty(t, d.itabs)
	_ = marker[0]
}

func FuzzParseDump(f *testing.F) {
	w := newDumpWriter()
	w.object(0x3000, []uint64{7, 8})
	w.object(0x1000, []uint64{0x3000, 0x1008}, 0, 1)
	w.segment(tagBSS, 0x500, []uint64{0x1000}, 0)
	w.goroutine(1, "sleep", "main.main", []uint64{0x1000}, 0)
	f.Add(w.bytes())
	f.Add([]byte(dumpHeader))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseDump(b)
		if err != nil {
			return
		}
		// Whatever parsed must search without reading past its bytes.
		targets := make([]int, 0, len(d.objects))
		for i := range d.objects {
			targets = append(targets, i)
		}
		s := d.search(d.roots(nil), targets, nil, 8, time.Time{})
		for _, o := range targets {
			if c, ok := s.pathTo(o); ok {
				n := &namer{d: d, bin: &binaryInfo{}, funcName: func(uint64) (string, uint64, bool) { return "", 0, false }}
				_ = n.name(c).String()
			}
		}
	})
}
