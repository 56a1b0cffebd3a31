package track

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/fpstack"
)

// leafer records through a method value, whose wrapper ("leaf-fm") is a
// real frame to a frame-pointer walk and none to runtime.Callers: a walk of
// a deep stack cut at 32 frames then holds one logical frame fewer than
// runtime.Callers does.
type leafer struct {
	t  testing.TB
	tr *Tracker
}

//go:noinline
func (l *leafer) leaf() *Record {
	r := &Record{Bytes: 8, Meta: InternMeta("tensor", "host", "", nil)}
	require.NoError(l.t, l.tr.Books().Record(context.Background(), r, 0))
	return r
}

// leafValue keeps the method value out of the compiler's sight, so that it
// is called through its wrapper.
var leafValue = func(l *leafer) func() *Record { return l.leaf }

//go:noinline
func viaFm(leaf func() *Record, depth int) *Record {
	if depth == 0 {
		return leaf()
	}
	return viaFm(leaf, depth-1)
}

// Two roots: the stacks below them are the same frame for frame.
//
//go:noinline
func rootA(leaf func() *Record, depth int) *Record { return viaFm(leaf, depth) }

//go:noinline
func rootB(leaf func() *Record, depth int) *Record { return viaFm(leaf, depth) }

// A walk cut at 32 frames that agrees with a deeper runtime.Callers capture
// must not become the key of a site that names frames past the walk: a
// stack that differs there would be served the first stack's site.
func TestTruncatedWalkNeverServesAnotherStacksSite(t *testing.T) {
	if !fpstack.Enabled() {
		t.Skip("frame-pointer capture is off on this platform or by TENSORLIFE_STACK")
	}
	for depth := 20; depth <= 40; depth++ {
		walked, err := New(FramePointers(true))
		require.NoError(t, err)
		plain, err := New(FramePointers(false))
		require.NoError(t, err)
		for _, root := range []func(func() *Record, int) *Record{rootA, rootB, rootA, rootB} {
			var recs []*Record
			for _, tr := range []*Tracker{walked, plain} { // one call instruction for both
				recs = append(recs, root(leafValue(&leafer{t, tr}), depth))
			}
			require.Equal(t, recs[1].Site().pcs, recs[0].Site().pcs, "depth %d: the walk served another stack's site", depth)
			require.NoError(t, (recs[0]).Release())
			require.NoError(t, (recs[1]).Release())
		}
		assert.Equal(t, plain.Totals().Sites, walked.Totals().Sites, "depth %d", depth)
	}
}

// Under collector churn, many goroutines allocating from stacks whose
// depth straddles the 32 frames a walk keeps each get the site
// runtime.Callers gives.
func TestSitesStayExactUnderGCChurn(t *testing.T) {
	if !fpstack.Enabled() {
		t.Skip("frame-pointer capture is off on this platform or by TENSORLIFE_STACK")
	}
	walked, err := New(FramePointers(true))
	require.NoError(t, err)
	plain, err := New(FramePointers(false))
	require.NoError(t, err)
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Add(1)
	go func() {
		defer churn.Done()
		var garbage [][]byte
		for {
			select {
			case <-stop:
				return
			default:
			}
			garbage = append(garbage, make([]byte, 64<<10))
			if len(garbage) > 64 {
				garbage = garbage[:0]
				runtime.GC()
			}
		}
	}()
	const goroutines, perGoroutine = 4, 600
	var wrong sync.Map
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range perGoroutine {
				depth := 22 + rng.IntN(14)
				root := rootA
				if rng.IntN(2) == 1 {
					root = rootB
				}
				var recs []*Record
				for _, tr := range []*Tracker{walked, plain} {
					recs = append(recs, root(leafValue(&leafer{t, tr}), depth))
				}
				a, b := recs[0].Site().pcs, recs[1].Site().pcs
				if !equalPCs(a, b) {
					wrong.Store(depth, true)
				}
				_ = (recs[0]).Release()
				_ = (recs[1]).Release()
			}
		}()
	}
	wg.Wait()
	close(stop)
	churn.Wait()
	var depths []int
	wrong.Range(func(k, _ any) bool { depths = append(depths, k.(int)); return true })
	assert.Empty(t, depths, "depths at which a walk served another stack's site")
}

func equalPCs(a, b []uintptr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Past a full walk cache, a stack whose walk was not kept pays
// runtime.Callers on every capture: each such capture is counted.
func TestCapturesPastAFullWalkCacheAreCounted(t *testing.T) {
	if !fpstack.Enabled() {
		t.Skip("frame-pointer capture is off on this platform or by TENSORLIFE_STACK")
	}
	tr, err := New(MaxSites(2)) // a cache of 4 walks
	require.NoError(t, err)
	for depth := range 6 {
		for range 3 {
			require.NoError(t, (captureVia(t, tr, depth)).Release())
		}
	}
	require.True(t, tr.walks.full())
	tt := tr.Totals()
	assert.EqualValues(t, 2*3, tt.StackUncached, "the last two stacks, three captures each")
	assert.Zero(t, tt.StackFallbacks)
	assert.Zero(t, tt.StackMismatches)
}
