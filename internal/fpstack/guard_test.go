package fpstack

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeChain is memory laid out as frame records: word 2i is the saved
// frame pointer of record i, word 2i+1 its return address. The test points
// saved frame pointers wherever a corrupt stack could.
type fakeChain []uintptr

// newFakeChain allocates a chain on the heap, where it does not move: on
// the stack, a stack growth would move the records and leave the saved
// frame pointers pointing at the old copy.
func newFakeChain(records int) fakeChain {
	c := make(fakeChain, 2*records)
	escapedChain = c
	return c
}

var escapedChain fakeChain

// addr returns the address of record i.
func (c fakeChain) addr(i int) uintptr { return uintptr(unsafe.Pointer(&c[2*i])) }

// link makes record i return to pc and continue at address next.
func (c fakeChain) link(i int, pc, next uintptr) {
	c[2*i], c[2*i+1] = next, pc
}

// walkFake walks c from record 0 as Walk walks a real stack, and reports
// how the counters moved.
func walkFake(t *testing.T, c fakeChain, buf []uintptr) (pcs []uintptr, ok bool, delta Counters) {
	t.Helper()
	before := Stats()
	n, ok := walkFrom(c.addr(0), 0, buf)
	runtime.KeepAlive(c)
	after := Stats()
	return buf[:n], ok, Counters{
		Walks:   after.Walks - before.Walks,
		Refused: after.Refused - before.Refused,
		Faults:  after.Faults - before.Faults,
	}
}

func TestWalkFollowsAFakeChain(t *testing.T) {
	c := newFakeChain(3)
	c.link(0, 0x1001, c.addr(1))
	c.link(1, 0x1002, c.addr(2))
	c.link(2, 0x1003, 0) // the outermost frame
	var buf [8]uintptr
	pcs, ok, delta := walkFake(t, c, buf[:])
	assert.True(t, ok)
	assert.Equal(t, []uintptr{0x1001, 0x1002, 0x1003}, pcs)
	assert.Equal(t, Counters{Walks: 1}, delta)

	// A full buffer ends the walk as runtime.Callers truncates: still ok.
	pcs, ok, _ = walkFake(t, c, buf[:2])
	assert.True(t, ok)
	assert.Equal(t, []uintptr{0x1001, 0x1002}, pcs)
}

// TestCorruptChainIsRefused feeds the walk every shape of broken chain a
// guard exists for; each is refused and counted, none is followed.
func TestCorruptChainIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		link func(c fakeChain)
		pcs  []uintptr // what the walk holds when it stops
	}{
		{"backwards", func(c fakeChain) { c.link(1, 0x1002, c.addr(0)) }, []uintptr{0x1001, 0x1002}},
		{"to itself", func(c fakeChain) { c.link(1, 0x1002, c.addr(1)) }, []uintptr{0x1001, 0x1002}},
		{"misaligned", func(c fakeChain) { c.link(1, 0x1002, c.addr(2)+3) }, []uintptr{0x1001, 0x1002}},
		{"too far", func(c fakeChain) { c.link(1, 0x1002, c.addr(1)+MaxFrameBytes+16) }, []uintptr{0x1001, 0x1002}},
		{"zero return address", func(c fakeChain) { c.link(1, 0, c.addr(2)) }, []uintptr{0x1001}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFakeChain(3)
			c.link(0, 0x1001, c.addr(1))
			c.link(1, 0x1002, c.addr(2))
			c.link(2, 0x1003, 0)
			tc.link(c)
			var buf [8]uintptr
			pcs, ok, delta := walkFake(t, c, buf[:])
			assert.False(t, ok)
			assert.Equal(t, tc.pcs, pcs)
			assert.Equal(t, Counters{Walks: 1, Refused: 1}, delta)
		})
	}
}

// TestEndlessChainIsCapped builds a chain that passes every guard at each
// step and never ends: the walk stops at MaxFrames and refuses.
func TestEndlessChainIsCapped(t *testing.T) {
	c := newFakeChain(MaxFrames + 10)
	for i := range MaxFrames + 9 {
		c.link(i, 0x1000+uintptr(i), c.addr(i+1))
	}
	c.link(MaxFrames+9, 0x2000, c.addr(MaxFrames+9)+16) // past the end: never read
	buf := make([]uintptr, 2*MaxFrames)
	pcs, ok, delta := walkFake(t, c, buf)
	assert.False(t, ok)
	assert.Len(t, pcs, MaxFrames)
	assert.Equal(t, Counters{Walks: 1, Refused: 1}, delta)
}

func TestWalkRefusesABadStart(t *testing.T) {
	var buf [4]uintptr
	n, ok := walkChain(0, 0, buf[:])
	assert.Zero(t, n)
	assert.False(t, ok)
	n, ok = walkChain(4099, 0, buf[:])
	assert.Zero(t, n)
	assert.False(t, ok)
}

func TestCaptureFallsBack(t *testing.T) {
	requireWalks(t)
	defer SetEnabled(SetEnabled(false))
	var walked, called [32]uintptr
	before := Stats()
	n, byWalk := Capture(0, walked[:])
	m := Callers(0, called[:])
	after := Stats()
	assert.False(t, byWalk, "disabled: runtime.Callers")
	assert.Equal(t, uint64(1), after.Fallbacks-before.Fallbacks)
	assert.Zero(t, after.Walks-before.Walks, "a disabled walk does not start")
	require.Equal(t, m, n)
	assert.Equal(t, called[1:m], walked[1:n], "same frames above the calling one")

	SetEnabled(true)
	before = Stats()
	n, byWalk = Capture(0, walked[:])
	m, ok := Walk(0, called[:])
	after = Stats()
	require.True(t, ok)
	assert.True(t, byWalk)
	assert.Zero(t, after.Fallbacks-before.Fallbacks)
	assert.Equal(t, uint64(2), after.Walks-before.Walks)
	require.Equal(t, m, n)
	assert.Equal(t, called[1:m], walked[1:n], "Capture(0) starts where Walk(0) does")
}

// requireWalks skips a test that needs frame-pointer walks where this
// architecture has none; there Walk always refuses (TestUnsupported).
func requireWalks(t *testing.T) {
	t.Helper()
	if !supported {
		t.Skipf("no frame-pointer walks on %s", runtime.GOARCH)
	}
}

// TestUnsupported checks what callers get where frame pointers are not
// walked: a refusal from Walk, runtime.Callers from Capture.
func TestUnsupported(t *testing.T) {
	if supported {
		t.Skipf("%s walks frame pointers", runtime.GOARCH)
	}
	var buf [8]uintptr
	n, ok := Walk(0, buf[:])
	assert.Zero(t, n)
	assert.False(t, ok)
	assert.False(t, Enabled())
	before := Stats()
	n, walked := Capture(0, buf[:])
	assert.False(t, walked)
	assert.Positive(t, n)
	assert.Equal(t, uint64(1), Stats().Fallbacks-before.Fallbacks)
}

func TestSetEnabled(t *testing.T) {
	defer SetEnabled(SetEnabled(true))
	assert.Equal(t, supported, Enabled())
	assert.True(t, SetEnabled(false))
	assert.False(t, Enabled())
	var buf [4]uintptr
	n, ok := Walk(0, buf[:])
	assert.Zero(t, n)
	assert.False(t, ok)
	assert.False(t, SetEnabled(true))
	assert.Equal(t, supported, Enabled())
}

func TestNegativeSkip(t *testing.T) {
	var buf [4]uintptr
	_, ok := Walk(-1, buf[:])
	assert.False(t, ok, "Walk refuses a negative skip")
	assert.Equal(t, Callers(0, buf[:]), Callers(-1, buf[:]), "Callers treats it as 0")
}

// TestConcurrentWalks walks from several goroutines at once (run it with
// -race): every walk succeeds and is counted once.
func TestConcurrentWalks(t *testing.T) {
	requireWalks(t)
	const goroutines, walks = 4, 500
	before := Stats()
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range goroutines {
		wg.Go(func() {
			var buf [32]uintptr
			for range walks {
				if _, ok := Walk(0, buf[:]); !ok {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, refused.Load())
	assert.Equal(t, uint64(goroutines*walks), Stats().Walks-before.Walks)
}

func TestStripedCounter(t *testing.T) {
	var c stripedCounter
	for i := range 1000 {
		c.add(uintptr(i) << 11)
	}
	assert.Equal(t, uint64(1000), c.load())
	used := 0
	for i := range c.stripes {
		if c.stripes[i].n.Load() > 0 {
			used++
		}
	}
	assert.Greater(t, used, counterStripes/2, "neighbouring stacks spread over stripes")
}
