package pprofexport

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// Two real functions, so that frames built by hand carry entries the
// runtime knows.
func physicalA() {}
func physicalB() {}

func entryOf(t *testing.T, fn any) (uintptr, string) {
	t.Helper()
	f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer())
	require.NotNil(t, f)
	return f.Entry(), f.Name()
}

// lineNames returns each location's functions, innermost first.
func lineNames(locs []*profile.Location) [][]string {
	out := make([][]string, len(locs))
	for i, l := range locs {
		for _, ln := range l.Line {
			out[i] = append(out[i], ln.Function.Name)
		}
	}
	return out
}

func TestStacksGroupInlinedFrames(t *testing.T) {
	entryA, nameA := entryOf(t, physicalA)
	entryB, nameB := entryOf(t, physicalB)
	const helper = "example.com/pkg.inlinedHelper"

	tests := []struct {
		name   string
		frames []track.Frame
		want   [][]string
	}{
		{
			name: "inlined call joins the function it was inlined into",
			frames: []track.Frame{
				{PC: entryA + 0x10, Function: helper, File: "a.go", Line: 3, Entry: entryA},
				{PC: entryA + 0x11, Function: nameA, File: "a.go", Line: 10, Entry: entryA},
				{PC: entryB + 0x8, Function: nameB, File: "b.go", Line: 20, Entry: entryB},
			},
			want: [][]string{{helper, nameA}, {nameB}},
		},
		{
			name: "recursion is two calls",
			frames: []track.Frame{
				{PC: entryA + 0x10, Function: nameA, Line: 10, Entry: entryA},
				{PC: entryA + 0x20, Function: nameA, Line: 11, Entry: entryA},
			},
			want: [][]string{{nameA}, {nameA}},
		},
		{
			name: "a compiled callee never joins an inlined caller",
			frames: []track.Frame{
				{PC: entryA + 0x10, Function: nameA, Line: 10, Entry: entryA},
				{PC: entryA + 0x30, Function: helper, Line: 3, Entry: entryA},
				{PC: entryA + 0x31, Function: nameA, Line: 12, Entry: entryA},
			},
			want: [][]string{{nameA}, {helper, nameA}},
		},
		{
			name: "frames sharing a PC are one call",
			frames: []track.Frame{
				{PC: 0x1234, Function: "inner", Line: 1},
				{PC: 0x1234, Function: "outer", Line: 2},
				{PC: 0x5678, Function: "root", Line: 3},
			},
			want: [][]string{{"inner", "outer"}, {"root"}},
		},
		{
			name: "an entry the runtime does not know merges nothing",
			frames: []track.Frame{
				{PC: 0x1010, Function: "x", Line: 1, Entry: 0x1000},
				{PC: 0x1020, Function: "y", Line: 2, Entry: 0x1000},
			},
			want: [][]string{{"x"}, {"y"}},
		},
		{
			name: "frames that failed to symbolize are kept under UnknownFunction",
			frames: []track.Frame{
				{PC: 0xdead, Function: format.UnknownFunction},
				{PC: 0xbeef, Function: ""},
				{PC: 0x5678, Function: "root", Line: 3},
			},
			want: [][]string{{format.UnknownFunction}, {format.UnknownFunction}, {"root"}},
		},
		{
			name:   "an empty stack is attributed to UnknownFunction",
			frames: nil,
			want:   [][]string{{format.UnknownFunction}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProfile()
			st := newStacks(p, false)
			locs := st.frames(tt.frames)
			assert.Equal(t, tt.want, lineNames(locs))
			require.NoError(t, p.CheckValid())
			for _, l := range locs {
				assert.Same(t, p.Mapping[0], l.Mapping)
			}
			// Building the same stack again shares every location.
			assert.Equal(t, locs, st.frames(tt.frames))
			assert.Len(t, p.Location, len(locs))
		})
	}
}

//go:noinline
func capturePCs() []uintptr {
	var buf [32]uintptr
	return buf[:runtime.Callers(1, buf[:])]
}

// inlinedCapture is small enough to be inlined into its caller, unless
// inlining is off.
func inlinedCapture() []uintptr { return capturePCs() }

//go:noinline
func compiledCaller() []uintptr { return inlinedCapture() }

// TestStacksMatchRuntimeInlining checks the grouping against the runtime's
// own knowledge on a real stack: a location per compiled frame, whose last
// line is that frame. It holds with and without inlining.
func TestStacksMatchRuntimeInlining(t *testing.T) {
	pcs := compiledCaller()
	var frames []track.Frame
	var compiled []string
	iter := runtime.CallersFrames(pcs)
	for {
		f, more := iter.Next()
		frames = append(frames, track.Frame{PC: f.PC, Function: f.Function, File: f.File, Line: f.Line, Entry: f.Entry})
		if f.Func != nil {
			compiled = append(compiled, f.Function)
		}
		if !more {
			break
		}
	}
	t.Logf("%d frames, %d compiled", len(frames), len(compiled))
	p := newProfile()
	locs := newStacks(p, false).frames(frames)
	require.Len(t, locs, len(compiled))
	for i, l := range locs {
		assert.Equal(t, compiled[i], l.Line[len(l.Line)-1].Function.Name, "location %d", i)
	}
	assert.Equal(t, len(frames), func() int {
		n := 0
		for _, l := range locs {
			n += len(l.Line)
		}
		return n
	}(), "every frame is a line of some location")
}
