package retainers

import (
	"errors"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scenarios keep items the way services keep tensors they never free.
// They are built by functions (not tests) and found by functions, so that
// no test frame holds an item: each path then starts at the root the
// scenario names.

type item struct{ a, b int }

type session struct {
	name  string
	items []*item
}

type registry struct{ sessions []*session }

type sessionKey struct {
	user string
	n    int
}

type keyedEntry struct {
	tags  []string
	items []*item
}

type wrapErr struct{ it *item }

func (wrapErr) Error() string { return "wrapped" }

var (
	scenarioMap      = map[string]*item{}
	scenarioRegistry = &registry{}
	scenarioHooks    []func() int
	scenarioBig      = map[int]*item{}
	scenarioAny      any
	scenarioErr      error
	scenarioChan     = make(chan *item, 4)
	scenarioSync     sync.Map
	scenarioKeyed    = map[sessionKey]keyedEntry{}

	hookWeak   weak.Pointer[item]
	chanWeak   weak.Pointer[item]
	parkedItem weak.Pointer[item]
	stackItem  weak.Pointer[item]
	parkedStop chan struct{} // never closed: the parked goroutines live as long as the test binary
)

//go:noinline
func makeHook(m *item) func() int { return func() int { return m.a } }

//go:noinline
func buildScenarios() {
	scenarioMap["prompt-17"] = &item{1, 77}
	for i := range 3 {
		s := &session{name: "s"}
		for j := range 3 {
			s.items = append(s.items, &item{i, j})
		}
		scenarioRegistry.sessions = append(scenarioRegistry.sessions, s)
	}
	h := &item{2, 2}
	hookWeak = weak.Make(h)
	scenarioHooks = append(scenarioHooks, makeHook(h))
	for i := range 100 {
		scenarioBig[i] = &item{i, i}
	}
	scenarioAny = &item{3, 3}
	scenarioErr = wrapErr{&item{4, 4}}
	scenarioChan <- &item{}
	c := &item{5, 5}
	chanWeak = weak.Make(c)
	scenarioChan <- c
	scenarioSync.Store("sess-9", &item{6, 6})
	scenarioKeyed[sessionKey{"ana", 3}] = keyedEntry{tags: []string{"x"}, items: []*item{{}, {7, 7}}}
	startParked()
}

// startParked starts a goroutine that keeps an item in a local while it is
// blocked on a channel.
//
//go:noinline
func startParked() {
	parkedStop = make(chan struct{})
	ready := make(chan struct{})
	go func() {
		it := &item{8, 8}
		parkedItem = weak.Make(it)
		close(ready)
		<-parkedStop
		runtime.KeepAlive(it)
	}()
	<-ready
	ready = make(chan struct{})
	go func() {
		var its []*item // a small backing array the compiler keeps on the stack
		for i := range 3 {
			its = append(its, &item{i, 10})
		}
		stackItem = weak.Make(its[1])
		close(ready)
		<-parkedStop
		_ = its[0].a + its[1].a
	}()
	<-ready
}

// scenarioNames are the scenarios in the order findScenarios returns them.
var scenarioNames = []string{"map", "struct slice field", "closure", "goroutine", "big map", "interface",
	"error", "channel buffer", "sync.Map", "struct key", "stack slice"}

//go:noinline
func findScenarios(cfg Config) (*Result, error) {
	v, _ := scenarioSync.Load("sess-9")
	targets := []any{
		scenarioMap["prompt-17"],
		scenarioRegistry.sessions[1].items[2],
		hookItem(),
		parkedItem.Value(),
		scenarioBig[57],
		scenarioAny,
		scenarioErr.(wrapErr).it,
		chanWeak.Value(),
		v,
		scenarioKeyed[sessionKey{"ana", 3}].items[1],
		stackItem.Value(),
	}
	return find(targets, cfg)
}

// hookItem returns the item the hook captured.
func hookItem() *item { return hookWeak.Value() }

var scenariosOnce sync.Once

func scenarios(t *testing.T) {
	t.Helper()
	scenariosOnce.Do(buildScenarios)
}

const pkg = "github.com/tensorlife/tensorlife/internal/retainers."

func TestFindNames(t *testing.T) {
	if rerunWithSymbols(t) {
		return
	}
	scenarios(t)
	res, err := findScenarios(Config{})
	require.NoError(t, err)
	assert.Empty(t, res.Note, "a binary with symbols names everything")
	want := map[string]string{
		"map":                "package var " + pkg + `scenarioMap["prompt-17"]   (map[string]*retainers.item)`,
		"struct slice field": "package var " + pkg + "scenarioRegistry.sessions[1].items[2]   (*retainers.registry)",
		"closure": "package var " + pkg + "scenarioHooks[0] → closure " + pkg + "makeHook.func1, captured m" +
			"   ([]func() int)",
		"big map":        "package var " + pkg + "scenarioBig[57]   (map[int]*retainers.item)",
		"interface":      "package var " + pkg + "scenarioAny.(*retainers.item)   (interface {})",
		"error":          "package var " + pkg + "scenarioErr.(retainers.wrapErr).it   (error)",
		"channel buffer": "package var " + pkg + "scenarioChan (channel buffer)[1]   (chan *retainers.item)",
		"sync.Map":       "package var " + pkg + `scenarioSync.Load("sess-9").(*retainers.item)   (sync.Map)`,
		"struct key": "package var " + pkg + `scenarioKeyed[retainers.sessionKey{"ana", 3}].items[1]` +
			"   (map[retainers.sessionKey]retainers.keyedEntry)",
	}
	for i, name := range scenarioNames {
		require.True(t, res.Found[i], name)
		got := res.Paths[i].String()
		if name == "stack slice" {
			assert.Regexp(t, `^goroutine \d+ \[chan receive\], created by `+regexp.QuoteMeta(pkg)+
				`startParked at find_test.go:\d+: frame `+regexp.QuoteMeta(pkg)+
				`startParked.func2 \(find_test.go:\d+\), local its\[1\]   \(\[\]\*retainers.item\)$`, got)
			continue
		}
		if name == "goroutine" {
			assert.Regexp(t, `^goroutine \d+ \[chan receive\], created by `+regexp.QuoteMeta(pkg)+
				`startParked at find_test.go:\d+: frame `+regexp.QuoteMeta(pkg)+
				`startParked.func1 \(find_test.go:\d+\), local it   \(\*retainers.item\)$`, got)
			assert.Equal(t, Goroutine, res.Paths[i].Kind)
			continue
		}
		assert.Equal(t, want[name], got, name)
		assert.Equal(t, PackageVar, res.Paths[i].Kind, name)
	}
	assert.Equal(t, 2, res.Paths[0].Hops, "the map header and its group")
}

// A position-independent executable runs at an offset from the addresses
// its symbols and DWARF give; the names are the same.
//
// It takes longer than 4 s where the build cache has no PIE build: it
// builds a copy of this test binary with -buildmode=pie, which compiles
// every package it links (the standard library included) again for
// position independence, most of a minute on 2 cores the first time and
// about 2 s with the cache warm. Only a real PIE binary tests the offset.
func TestFindNamesInAPositionIndependentExecutable(t *testing.T) {
	bin := buildTestBinary(t, "-buildmode=pie", withSymbols)
	out, err := runChild(t, bin, "TestFindNames")
	require.NoError(t, err, out)
	assert.Contains(t, out, "--- PASS: TestFindNames")
}

func TestFindWithoutSymbols(t *testing.T) {
	scenarios(t)
	res, err := findScenarios(Config{noBinary: true})
	require.NoError(t, err)
	assert.Contains(t, res.Note, "no symbol table and no DWARF")
	assert.Contains(t, res.Note, RerunHint, "the note says how to rerun")
	for i, name := range scenarioNames {
		require.True(t, res.Found[i], name)
		p := res.Paths[i]
		switch name {
		case "stack slice":
			// On the stack unless the build moves it (the race detector does).
			assert.Regexp(t, `, stack slot sp\+0x[0-9a-f]+ → (stack-allocated object \+8|object \(\d+ B \+8\))$`, p.String())
		case "goroutine":
			assert.Regexp(t, `^goroutine \d+ \[chan receive\], created by `+regexp.QuoteMeta(pkg)+
				`startParked at find_test.go:\d+: frame `+regexp.QuoteMeta(pkg)+
				`startParked.func1 \(find_test.go:\d+\), stack slot sp\+0x[0-9a-f]+$`, p.String(),
				"the goroutine, its creator and the frame are named without symbols")
		case "closure":
			assert.Contains(t, p.Expr, "→ closure "+pkg+"makeHook.func1", "a closure's function is named")
			fallthrough
		default:
			assert.Regexp(t, `^a package variable \((data|bss) segment \+0x[0-9a-f]+\)`, p.Root, name)
			assert.Empty(t, p.Type)
		}
	}
}

// The targets' own list, and the frames looking for them, are no path: a
// target nothing else holds has none.
func TestFindOwnHoldIsNoPath(t *testing.T) {
	res, err := findAlone()
	require.NoError(t, err)
	assert.False(t, res.Found[0], "%v", res.Paths[0])
	assert.Contains(t, res.Note, "1 target had no path from a root")
}

//go:noinline
func findAlone() (*Result, error) { return find([]any{&item{9, 9}}, Config{}) }

func TestFindRefusesBadInput(t *testing.T) {
	_, err := find([]any{item{}}, Config{})
	assert.True(t, errors.Is(err, ErrInvalidTarget), "%v", err)
	_, err = find([]any{(*item)(nil)}, Config{})
	assert.True(t, errors.Is(err, ErrInvalidTarget), "%v", err)
	_, err = find([]any{nil}, Config{})
	assert.True(t, errors.Is(err, ErrInvalidTarget), "%v", err)
}

func TestFindRefusesAHeapOverTheCap(t *testing.T) {
	_, err := find([]any{&item{}}, Config{MaxDumpBytes: 1 << 10})
	var tooLarge *TooLargeError
	require.ErrorAs(t, err, &tooLarge)
	assert.True(t, errors.Is(err, ErrTooLarge))
	assert.True(t, tooLarge.Estimated, "refused before writing")
	assert.Equal(t, int64(1<<10), tooLarge.Limit)
}

func TestFindRunsInTestsOnly(t *testing.T) {
	defer func(f func() bool) { inTestBinary = f }(inTestBinary)
	inTestBinary = func() bool { return false }
	_, err := Find([]any{&item{}}, Config{})
	assert.True(t, errors.Is(err, ErrNotTest), "%v", err)
}

func TestShortTypeName(t *testing.T) {
	for in, want := range map[string]string{
		"map[string]*github.com/acme/infer.entry": "map[string]*infer.entry",
		"[]func() int":                              "[]func() int",
		"chan<- *a/b.T":                             "chan<- *b.T",
		"struct { x *a/b.T; y map[a/c.K]a/d.V }":    "struct { x *b.T; y map[c.K]d.V }",
		"github.com/x/y.G[github.com/x/z.T,string]": "y.G[z.T,string]",
	} {
		assert.Equal(t, want, shortTypeName(in), in)
	}
}

func TestRenderJoinsUnknownObjects(t *testing.T) {
	got := render([]seg{{kind: segField, text: "a"}, {kind: segUnknown, n: 8, size: 48},
		{kind: segUnknown, n: 0, size: 16}, {kind: segIndex, n: 2}})
	assert.Equal(t, ".a → 2 objects (48 B +8, 16 B +0)[2]", got)
	assert.True(t, strings.HasPrefix(render([]seg{{kind: segKey, text: `"k"`}}), `["k"]`))
}
