package fpstack_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/fpstack"
)

// generatePaths composes frame kinds into stacks: every kind alone, every
// ordered pair, and seeded random paths of three to six layers, each
// captured into buffers of depth frames.
func generatePaths(depth, random int, seed uint64) []*path {
	var kinds []frameKind
	for k := range numKinds {
		if k.available() {
			kinds = append(kinds, k)
		}
	}
	var paths []*path
	for _, a := range kinds {
		paths = append(paths, &path{kinds: []frameKind{a}, depth: depth})
		for _, b := range kinds {
			paths = append(paths, &path{kinds: []frameKind{a, b}, depth: depth})
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	for range random {
		p := &path{kinds: make([]frameKind, 3+rng.IntN(4)), depth: depth}
		for i := range p.kinds {
			p.kinds[i] = kinds[rng.IntN(len(kinds))]
		}
		paths = append(paths, p)
	}
	return paths
}

// cFramesOnStack reports whether the goroutine that captures p's stack has
// C frames on it: a cgo callback after the last new goroutine.
func (p *path) cFramesOnStack() bool {
	for i := len(p.kinds) - 1; i >= 0; i-- {
		switch p.kinds[i] {
		case kindCgo:
			return true
		case kindGoCall, kindGoClosure:
			return false
		}
	}
	return false
}

func (p *path) name() string {
	names := make([]string, len(p.kinds))
	for i, k := range p.kinds {
		names[i] = k.String()
	}
	return fmt.Sprintf("%s/depth%d", strings.Join(names, ">"), p.depth)
}

// differential runs every path and checks the two captures frame by frame.
// A stack with C frames may be refused by the walk (the chain leaves the
// goroutine stack at cgocallback); every other stack must be walked, and
// must agree with runtime.Callers wrappers aside.
func differential(t *testing.T, paths []*path) (distinct, refused int) {
	t.Helper()
	before := fpstack.Stats()
	stacks := make(map[string]bool)
	failures := 0
	for _, p := range paths {
		dispatch(p, 0)
		stacks[fmt.Sprint(p.walked, p.called)] = true
		if !p.ok {
			refused++
			if !assert.Truef(t, p.cFramesOnStack(), "%s: walk refused a Go stack:\n%s", p.name(), dump(p.walked)) {
				failures++
			}
			continue
		}
		if d, differ := fpstack.Compare(p.walked, p.called, p.depth); differ {
			failures++
			assert.Failf(t, "captures differ", "%s: %v\nwalk:\n%sruntime.Callers:\n%s",
				p.name(), d, dump(p.walked), dump(p.called))
		}
		if failures > 5 {
			t.Fatal("too many differences; stopping")
		}
	}
	after := fpstack.Stats()
	assert.Equal(t, uint64(len(paths)), after.Walks-before.Walks, "one walk per path")
	assert.Equal(t, uint64(refused), after.Refused+after.Faults-before.Refused-before.Faults,
		"every refusal is counted")
	return len(stacks), refused
}

func TestDifferentialGeneratedStacks(t *testing.T) {
	fpstack.RequireWalks(t)
	paths := generatePaths(32, 1500, 1)
	require.Greater(t, len(paths), 2000)
	distinct, refused := differential(t, paths)
	t.Logf("compared %d generated stacks (%d distinct) of %d frame kinds; %d with C frames refused by the walk",
		len(paths), distinct, numKinds, refused)
	assert.Greater(t, distinct, 1500, "the generator makes distinct stacks")

	// The kinds must really produce what the comparison is about: stacks
	// where inlining makes the walk shorter than runtime.Callers, and stacks
	// where wrappers make it longer.
	var inlined, wrapped bool
	for _, p := range paths {
		if p.ok && len(p.called) < p.depth {
			inlined = inlined || len(p.walked) < len(p.called)
			wrapped = wrapped || len(p.walked) > len(p.called)
		}
	}
	assert.True(t, inlined, "some stack has inlined frames")
	assert.True(t, wrapped, "some stack has wrapper frames")
}

// TestDifferentialTruncated captures into short buffers, so that stacks are
// cut in every place: inside inlined groups, next to wrappers.
func TestDifferentialTruncated(t *testing.T) {
	fpstack.RequireWalks(t)
	differential(t, generatePaths(6, 300, 2))
}

// TestDeepRecursion captures stacks deeper than the buffer. Both captures
// fill it; they agree frame for frame over what both hold. Where wrappers
// sit in the truncated part, the walk spends buffer slots on them and holds
// fewer logical frames than runtime.Callers: a known difference, reported.
func TestDeepRecursion(t *testing.T) {
	fpstack.RequireWalks(t)
	for _, tc := range []struct {
		name  string
		kinds []frameKind
	}{
		{"plain", []frameKind{kindRecursion}},
		{"methodvalue", []frameKind{kindMethodValue}},
		{"defercall", []frameKind{kindDeferCall}},
		{"inlined", []frameKind{kindInlinedTwice}},
	} {
		for _, depth := range []int{32, 64} {
			for _, levels := range []int{depth + 8, 3 * depth} {
				t.Run(fmt.Sprintf("%s/%d-levels/depth%d", tc.name, levels, depth), func(t *testing.T) {
					p := &path{depth: depth}
					for range levels {
						p.kinds = append(p.kinds, tc.kinds...)
					}
					dispatch(p, 0)
					require.True(t, p.ok)
					assert.Len(t, p.walked, depth, "the walk fills its buffer")
					assert.Len(t, p.called, depth, "runtime.Callers fills its buffer")
					d, differ := fpstack.Compare(p.walked, p.called, depth)
					assert.False(t, differ, "%v", d)
					walked := logical(p.walked)
					t.Logf("logical frames held: walk %d, runtime.Callers %d", len(walked), len(logical(p.called)))
				})
			}
		}
	}
}

// TestSkipMatchesCallers checks the skip contract: Walk(s) and Callers(s)
// from one function start at the same frame, and with skip 0 that frame is
// the calling function itself, at the line of each call.
func TestSkipMatchesCallers(t *testing.T) {
	fpstack.RequireWalks(t)
	var walked, called [32]uintptr
	n, ok := fpstack.Walk(0, walked[:])
	m := fpstack.Callers(0, called[:])
	require.True(t, ok)
	w, c := logical(walked[:n]), logical(called[:m])
	require.NotEmpty(t, w)
	require.NotEmpty(t, c)
	self := "github.com/tensorlife/tensorlife/internal/fpstack_test.TestSkipMatchesCallers"
	assert.Equal(t, self, w[0].Function)
	assert.Equal(t, self, c[0].Function)
	assert.Equal(t, w[0].Line+1, c[0].Line, "each names the line of its own call")
	assert.Equal(t, w[1:], c[1:])

	// runtime.Callers counts the frame of runtime.Callers itself: skip 1
	// there is skip 0 here.
	m = runtime.Callers(1, called[:])
	assert.Equal(t, self, logical(called[:m])[0].Function)
}

// logical symbolizes pcs into "function file:line" frames, wrappers dropped.
func logical(pcs []uintptr) []fpstack.Frame {
	var out []fpstack.Frame
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Function != "" && !fpstack.IsWrapper(f) {
			out = append(out, fpstack.Frame{Function: f.Function, File: f.File, Line: f.Line})
		}
		if !more {
			return slices.Clip(out)
		}
	}
}

// dump formats pcs for a failure message, marking wrappers.
func dump(pcs []uintptr) string {
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		mark := ""
		if fpstack.IsWrapper(f) {
			mark = "  (wrapper)"
		}
		fmt.Fprintf(&b, "    %s %s:%d%s\n", f.Function, f.File, f.Line, mark)
		if !more {
			return b.String()
		}
	}
}

// TestWalkAcrossStackGrowth walks at every depth of a fresh goroutine's
// small stack, so that some walks start right where the stack must grow,
// in Walk's or walkFrom's prologue; each must agree with runtime.Callers.
// (A walk that read the copy a growth left behind would mostly still
// agree, the old copy being intact until reused: walkFrom's ordering, not
// this test, is what rules that out.)
func TestWalkAcrossStackGrowth(t *testing.T) {
	fpstack.RequireWalks(t)
	for levels := range 400 {
		var walked, called [64]uintptr
		var n, m int
		var ok bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			padded(levels, func() {
				n, ok = fpstack.Walk(1, walked[:])
				m = fpstack.Callers(1, called[:])
			})
		}()
		<-done
		require.True(t, ok, "levels %d", levels)
		d, differ := fpstack.Compare(walked[:n], called[:m], len(walked))
		require.False(t, differ, "levels %d: %v", levels, d)
	}
}

// padded recurses n times in frames of about 100 bytes, then calls f.
//
//go:noinline
func padded(n int, f func()) {
	var pad [12]uint64
	pad[n%12] = uint64(n)
	if n == 0 {
		f()
		return
	}
	padded(n-1, f)
	runtime.KeepAlive(pad)
}
