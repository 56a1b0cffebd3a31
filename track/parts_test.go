package track_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

type inner struct{ n int }

var innerLocal = track.NewLocal(func() *inner { return &inner{n: 7} })

type outer struct{ in *inner }

// of is l.Of(tr), which must not fail.
func of[T any](t testing.TB, l *track.Local[T], tr *track.Tracker) *T {
	t.Helper()
	v, err := l.Of(tr)
	require.NoError(t, err)
	return v
}

func TestLocalMakerMayReadTheTracker(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	reentrant := track.NewLocal(func() *outer { return &outer{in: of(t, innerLocal, tr)} })
	o := of(t, reentrant, tr) // a maker holding a lock across user code would deadlock here
	assert.Equal(t, 7, o.in.n)
	assert.Same(t, o, of(t, reentrant, tr), "one value per tracker")
	assert.Same(t, of(t, innerLocal, tr), o.in)
}

func TestLocalIsOnePerTrackerUnderRaces(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	l := track.NewLocal(func() *inner { return new(inner) })
	var wg sync.WaitGroup
	got := make([]*inner, 16)
	for i := range got {
		wg.Go(func() { got[i], _ = l.Of(tr) })
	}
	wg.Wait()
	for _, p := range got {
		assert.Same(t, got[0], p, "every caller sees the value that won")
	}
	other, err := track.New()
	require.NoError(t, err)
	assert.NotSame(t, got[0], of(t, l, other), "another tracker has its own")
}

type selfReader struct{ self *selfReader }

// A maker that reads its own Local would recurse until the stack
// overflows, which no recover catches: Of panics first, naming the Local
// by its type and the line that made it.
func TestLocalMakerReadingItsOwnLocalPanicsNamingIt(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	var self *track.Local[selfReader]
	self = track.NewLocal(func() *selfReader {
		s, _ := self.Of(tr)
		return &selfReader{self: s}
	})
	var msg any
	func() {
		defer func() { msg = recover() }()
		_, _ = self.Of(tr)
	}()
	require.NotNil(t, msg, "a clear panic, not a stack overflow")
	assert.Contains(t, msg, "*track_test.selfReader")
	assert.Contains(t, msg, "parts_test.go:")
	assert.Contains(t, msg, "reads its own Local")

	// The Local is usable once its maker is fixed, and others never were broken.
	assert.Equal(t, 7, of(t, innerLocal, tr).n)
}

// A tracker keeps at most MaxLocals Locals' values: Locals made per call
// fail past them with ErrTooManyLocals instead of growing the tracker,
// and the values kept stay.
func TestLocalsPerTrackerAreBounded(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	first := of(t, innerLocal, tr)
	var failed error
	made := 1
	for range track.MaxLocals + 10 {
		l := track.NewLocal(func() *inner { return new(inner) }) // per call: the misuse
		if _, err := l.Of(tr); err != nil {
			failed = err
			break
		}
		made++
	}
	require.ErrorIs(t, failed, track.ErrTooManyLocals)
	assert.Contains(t, failed.Error(), "*track_test.inner")
	assert.Equal(t, track.MaxLocals, made, "every Local up to the bound kept")
	assert.Same(t, first, of(t, innerLocal, tr), "a value kept is still there")

	other, err := track.New()
	require.NoError(t, err)
	assert.NotNil(t, of(t, track.NewLocal(func() *inner { return new(inner) }), other), "the bound is per tracker")
}

// reserving is an allocator part; its padding keeps it out of the tiny
// allocator, whose blocks outlive their objects.
type reserving struct {
	bytes int64
	_     [64]byte
}

func (r *reserving) PartInfo() track.PartInfo {
	return track.PartInfo{Kind: "allocator", Device: "host", Reserved: r.bytes, Left: -1}
}

// plainPart holds no memory; it is a part of another type.
type plainPart struct{ _ [64]byte }

func (*plainPart) PartInfo() track.PartInfo { return track.PartInfo{Kind: "plain", Left: -1} }

// readParts returns the parts of tr of type P, read through the seam.
func readParts[P any](t *testing.T, tr *track.Tracker) []P {
	t.Helper()
	var out []P
	require.Empty(t, track.Read(tr, "PartInfo", func(p P) { out = append(out, p) }))
	return out
}

func TestReadReadsThePartsOfATypeInOrder(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	a, b, p := &reserving{bytes: 1}, &reserving{bytes: 2}, &plainPart{}
	track.Attach(tr, a)
	track.Attach(tr, p)
	track.Attach(tr, b)
	track.Attach(tr, a) // a second Attach keeps the first place
	assert.Equal(t, []*reserving{a, b}, readParts[*reserving](t, tr))
	assert.Equal(t, []*plainPart{p}, readParts[*plainPart](t, tr))
	assert.Equal(t, []track.Part{a, p, b}, readParts[track.Part](t, tr))
	assert.Equal(t, int64(3), tr.ReservedOn("host"))
	track.Detach(tr, a)
	assert.Equal(t, []*reserving{b}, readParts[*reserving](t, tr))
	track.Attach(nil, a) // an untracked part attaches nothing
	track.Detach(nil, a)

	func() { track.Attach(tr, &reserving{bytes: 5}) }() // unreachable once this returns
	runtime.GC()
	runtime.GC()
	assert.Equal(t, []*reserving{b}, readParts[*reserving](t, tr), "a collected part leaves the books")
	runtime.KeepAlive(b)
	runtime.KeepAlive(p)
}

func TestReadRecoversEachPartAndGoesOn(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	a, b := &reserving{bytes: 1}, &reserving{bytes: 2}
	track.Attach(tr, a)
	track.Attach(tr, b)
	var read []*reserving
	skipped := track.Read(tr, "Stats", func(r *reserving) {
		if r == a {
			panic("a's figures")
		}
		read = append(read, r)
	})
	require.Len(t, skipped, 1)
	var pe *track.PanicError
	require.ErrorAs(t, skipped[0], &pe)
	assert.Equal(t, "*track_test.reserving", pe.Part)
	assert.Equal(t, "Stats", pe.Method)
	assert.Equal(t, []*reserving{b}, read, "the reading goes on past the part that panicked")
	assert.EqualValues(t, 1, tr.Totals().PartPanics)
}
