package retainers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// graph is a synthetic heap: data[0] → A → B → T, data[1] → C → D → E → T,
// and a goroutine's frame → F → T2 → T.
func graph(t *testing.T) *heapDump {
	t.Helper()
	w := newDumpWriter()
	const A, B, C, D, E, F, T, T2 = 0x1000, 0x1100, 0x1200, 0x1300, 0x1400, 0x1500, 0x2000, 0x2100
	w.object(A, []uint64{B, 0}, 0)
	w.object(B, []uint64{0, T}, 1)
	w.object(C, []uint64{D}, 0)
	w.object(D, []uint64{E}, 0)
	w.object(E, []uint64{T}, 0)
	w.object(F, []uint64{T2}, 0)
	w.object(T, []uint64{1, 2})
	w.object(T2, []uint64{T}, 0)
	w.segment(tagData, 0x500, []uint64{A, C}, 0, 1)
	w.goroutine(7, "select", "main.loop", []uint64{F}, 0)
	d, err := parseDump(w.bytes())
	require.NoError(t, err)
	return d
}

func addrs(d *heapDump, c chain) []uint64 {
	var out []uint64
	for _, o := range c.objects {
		out = append(out, d.objects[o].addr)
	}
	return out
}

func TestSearchFindsAShortestPath(t *testing.T) {
	d := graph(t)
	target := d.find(0x2000)
	s := d.search(d.roots(nil), []int{target}, nil, 64, time.Time{})
	c, ok := s.pathTo(target)
	require.True(t, ok)
	assert.Equal(t, rootSegment, c.root.kind)
	assert.Equal(t, int64(0), c.root.off, "data[0], the shorter way")
	assert.Equal(t, []uint64{0x1000, 0x1100, 0x2000}, addrs(d, c))
	assert.Equal(t, []uint64{0, 8}, c.offs, "each step says which word points on")
}

func TestSearchBlockedObjectsAreNoPath(t *testing.T) {
	d := graph(t)
	target := d.find(0x2000)
	s := d.search(d.roots(nil), []int{target}, []int{d.find(0x1100)}, 64, time.Time{})
	c, ok := s.pathTo(target)
	require.True(t, ok)
	assert.Equal(t, []uint64{0x1500, 0x2100, 0x2000}, addrs(d, c), "around B, through the frame")
	_, ok = s.pathTo(d.find(0x1100))
	assert.False(t, ok, "a blocked object is never reached")

	s = d.search(d.roots(nil), []int{target}, []int{d.find(0x1100), d.find(0x2100)}, 64, time.Time{})
	c, ok = s.pathTo(target)
	require.True(t, ok)
	assert.Equal(t, []uint64{0x1200, 0x1300, 0x1400, 0x2000}, addrs(d, c), "the long way is left")
}

func TestSearchDoesNotRunThroughAnotherTarget(t *testing.T) {
	d := graph(t)
	target, other := d.find(0x2000), d.find(0x2100)
	s := d.search(d.roots(nil), []int{target, other}, []int{d.find(0x1100), d.find(0x1300)}, 64, time.Time{})
	_, ok := s.pathTo(target)
	assert.False(t, ok, "the only way left runs through the other target")
	c, ok := s.pathTo(other)
	require.True(t, ok)
	assert.Equal(t, rootFrame, c.root.kind)
	assert.Equal(t, []uint64{0x1500, 0x2100}, addrs(d, c))
}

func TestSearchDepthBound(t *testing.T) {
	d := graph(t)
	target := d.find(0x2000)
	s := d.search(d.roots(nil), []int{target}, []int{d.find(0x1100)}, 2, time.Time{})
	_, ok := s.pathTo(target)
	assert.False(t, ok, "the shortest way around B is 3 objects long")
	assert.NotEmpty(t, s.stopped)
}

func TestSkipOwnFrames(t *testing.T) {
	g := &goroutine{id: 3, frames: []frame{
		{name: "runtime/debug.WriteHeapDump"},
		{name: selfPackage + ".find"},
		{name: "github.com/tensorlife/tensorlife/track/tracktest.VerifyNone"},
		{name: "main.TestLeak"},
		{name: selfPackage + ".helper"},
	}}
	skip := skipOwnFrames(3, []string{"github.com/tensorlife/tensorlife/track/tracktest"})
	var kept []string
	for i := range g.frames {
		if !skip(g, &g.frames[i], i) {
			kept = append(kept, g.frames[i].name)
		}
	}
	assert.Equal(t, []string{"main.TestLeak", selfPackage + ".helper"}, kept,
		"only the run of own frames from the top is left out")
	other := &goroutine{id: 4, frames: g.frames}
	assert.False(t, skip(other, &other.frames[0], 0), "other goroutines keep every frame")
	assert.False(t, isOwnFrame(selfPackage+".TestFind", nil), "a test of this package is the user's")
}

func TestSplitFuncName(t *testing.T) {
	for name, want := range map[string][2]string{
		"main.main":                    {"main", "main"},
		"a/b.(*T).M.func1":             {"a/b", "(*T).M.func1"},
		"gopkg.in/yaml.v3.Unmarshal":   {"gopkg.in/yaml", "v3.Unmarshal"},
		"runtime/debug.WriteHeapDump":  {"runtime/debug", "WriteHeapDump"},
		"github.com/x/y.z[...].method": {"github.com/x/y", "z[...].method"},
	} {
		pkg, rest := splitFuncName(name)
		assert.Equal(t, want, [2]string{pkg, rest}, name)
	}
}

// A frame slot that points into its own stack (a backing array the
// compiler put there) makes the pointed-at words roots: the dump has no
// pointer map for stack objects.
func TestStackObjectsAreScanned(t *testing.T) {
	w := newDumpWriter()
	const T = 0x2000
	w.object(T, []uint64{1, 2})
	// sp is 0x9000: word 0 is the slice's pointer to word 2, its array.
	w.goroutine(3, "chan receive", "main.worker", []uint64{0x9010, 3, T, 0}, 0)
	d, err := parseDump(w.bytes())
	require.NoError(t, err)
	roots := d.roots(nil)
	require.Len(t, roots, 1)
	r := roots[0]
	assert.Equal(t, rootFrame, r.kind)
	assert.Equal(t, int64(16), r.off, "the array's word")
	assert.Equal(t, int64(0), r.via, "the slot that points at the array")
	assert.Equal(t, uint64(T), r.addr)

	s := d.search(roots, []int{d.find(T)}, nil, 8, time.Time{})
	_, ok := s.pathTo(d.find(T))
	assert.True(t, ok)
}

// The collector keeps what an object with a finalizer points at, not the
// object itself: its fields are roots, named after the finalizer.
func TestFinalizerFieldsAreRoots(t *testing.T) {
	w := newDumpWriter()
	const F, T = 0x1500, 0x2000
	w.object(F, []uint64{0, T}, 1)
	w.object(T, []uint64{1, 2})
	w.int(tagFinalizer)
	w.int(F)
	w.int(0x7000) // the funcval, outside the heap
	w.int(0x401000)
	w.int(0)
	w.int(0)
	d, err := parseDump(w.bytes())
	require.NoError(t, err)
	target := d.find(T)
	s := d.search(d.roots(nil), []int{target}, nil, 8, time.Time{})
	c, ok := s.pathTo(target)
	require.True(t, ok)
	assert.Equal(t, rootFinalizer, c.root.kind)
	assert.Equal(t, int64(8), c.root.off)
	assert.Equal(t, []uint64{T}, addrs(d, c), "the finalized object is not on the path: its field is the root")
	n := &namer{d: d, bin: &binaryInfo{}, funcName: func(uint64) (string, uint64, bool) { return "main.release", 0x401000, true }}
	p := n.name(c)
	assert.Equal(t, Finalizer, p.Kind)
	assert.Equal(t, "an object at 0x1500, whose finalizer main.release keeps what it points at → object (16 B +8)", p.String())
}
