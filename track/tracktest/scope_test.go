package tracktest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

func TestContextChecksOnlyItsScope(t *testing.T) {
	e := newEnv(t, "shared")
	outside := e.newTensor(t, context.Background(), 4) // live all along, in no scope

	leaker := newFakeT("TestLeaker")
	leakCtx := tracktest.Context(leaker, e.tr, scoped...)
	leaked := e.newTensor(t, leakCtx, 2, 3)

	clean := newFakeT("TestClean")
	cleanCtx := tracktest.Context(clean, e.tr, scoped...)
	x := e.newTensor(t, track.WithLabels(cleanCtx, "request", "r9"), 5)
	require.NoError(t, x.Free())

	clean.finish()
	assert.Empty(t, clean.Errors(), "another scope's live tensors are not this scope's leaks")

	leaker.finish()
	errs := leaker.Errors()
	require.Len(t, errs, 1)
	assert.Regexp(t, `^tracktest: 1 tensor leaked \(24 B\) in tracker "shared", scope tensorlife.test=TestLeaker#\d+:\n`, errs[0])
	assert.Regexp(t, fmt.Sprintf(`tensor %d: float32\[2 3\], 24 B, kind tensor, device host, age [^,]+, labels \{tensorlife.test=TestLeaker#\d+\}\n`, leaked.ID()), errs[0])
	assert.NotContains(t, errs[0], fmt.Sprintf("tensor %d:", outside.ID()))

	require.NoError(t, leaked.Free())
	require.NoError(t, outside.Free())
}

func TestContextScopesParallelTests(t *testing.T) {
	e := newEnv(t, "parallel")
	// A leaking test's tensor stays live while the parallel tests below run
	// and check: none of them may see it.
	leaker := newFakeT("TestLeaker")
	leaked := e.newTensor(t, tracktest.Context(leaker, e.tr, scoped...), 1024)

	t.Run("group", func(t *testing.T) {
		for i := range 8 {
			t.Run(fmt.Sprintf("clean-%d", i), func(t *testing.T) {
				t.Parallel()
				ft := newFakeT(t.Name())
				ctx := tracktest.Context(ft, e.tr, scoped...)
				var xs []*tensor.Tensor
				for range 10 {
					xs = append(xs, e.newTensor(t, ctx, 16))
				}
				for _, x := range xs {
					require.NoError(t, x.Free())
				}
				ft.finish()
				assert.Empty(t, ft.Errors())
			})
		}
		for i := range 4 {
			// Real tests with real scopes pass too, beside the leak.
			t.Run(fmt.Sprintf("real-%d", i), func(t *testing.T) {
				t.Parallel()
				ctx := tracktest.Context(t, e.tr, scoped...)
				x := e.newTensor(t, ctx, 8)
				t.Cleanup(func() { require.NoError(t, x.Free()) }) // runs before the check
			})
		}
	})

	leaker.finish()
	require.Len(t, leaker.Errors(), 1)
	assert.Contains(t, leaker.Errors()[0], "1 tensor leaked (4 KiB)")
	require.NoError(t, leaked.Free())
}

func TestContextScopesAreUnique(t *testing.T) {
	e := newEnv(t, "unique")
	ft := newFakeT("TestSame")
	a := tracktest.Context(ft, e.tr, scoped...)
	b := tracktest.Context(ft, e.tr, scoped...)
	la, _ := track.LabelsFrom(a).Get(tracktest.ScopeLabel)
	lb, _ := track.LabelsFrom(b).Get(tracktest.ScopeLabel)
	assert.Regexp(t, `^TestSame#\d+$`, la)
	assert.NotEqual(t, la, lb)

	unnamed := &scopeOnlyT{}
	c := tracktest.Context(unnamed, e.tr)
	lc, _ := track.LabelsFrom(c).Get(tracktest.ScopeLabel)
	assert.Regexp(t, `^scope#\d+$`, lc, "a T without Name gets a generic scope name")
	unnamed.finish()
	assert.Empty(t, unnamed.errors)
}

func TestContextDerivesFromTestContext(t *testing.T) {
	type key struct{}
	e := newEnv(t, "derive")
	ct := contextT{newFakeT("TestDerive")}
	ct.ctx = track.WithLabels(context.WithValue(context.Background(), key{}, "v"), "model", "m1")
	ctx := tracktest.Context(ct, e.tr, scoped...)
	assert.Equal(t, "v", ctx.Value(key{}))
	labels := track.LabelsFrom(ctx)
	model, _ := labels.Get("model")
	assert.Equal(t, "m1", model, "the test context's labels are kept")

	x := e.newTensor(t, ctx, 1)
	ct.finish()
	require.Len(t, ct.Errors(), 1)
	assert.Regexp(t, `labels \{model=m1, tensorlife.test=TestDerive#\d+\}`, ct.Errors()[0])
	require.NoError(t, x.Free())
}

func TestContextWithRealTestContext(t *testing.T) {
	e := newEnv(t, "real")
	ctx := tracktest.Context(t, e.tr, scoped...)
	require.NoError(t, ctx.Err(), "live while the test runs")
	x := e.newTensor(t, ctx, 3)
	require.NoError(t, x.Free())
}

func TestContextReportsDroppedHandles(t *testing.T) {
	for _, reclaim := range []bool{false, true} {
		t.Run(fmt.Sprintf("ReclaimLeaks(%v)", reclaim), func(t *testing.T) {
			noAutoGC(t)
			e := newEnv(t, "scope-dropped", track.ReclaimLeaks(reclaim))
			ft := newFakeT("TestDrops")
			id := dropTensor(t, e, tracktest.Context(ft, e.tr, scoped...))
			other := newFakeT("TestOther")
			tracktest.Context(other, e.tr, scoped...)
			dropTensor(t, e, context.Background()) // in no scope

			// Both are found, and reclaimed by a reclaiming tracker, long
			// before the scopes' checks begin.
			live := int64(2)
			if reclaim {
				live = 0
			}
			collectDropped(t, e.tr, 2, live)
			if reclaim {
				assert.NoError(t, tracktest.Find(e.tr, fast...), "a whole-tracker check began too late to see them")
			}

			other.finish()
			assert.Empty(t, other.Errors(), "tensors dropped in another scope, or in none, are not this scope's")
			ft.finish()
			errs := ft.Errors()
			require.Len(t, errs, 1)
			assert.Regexp(t, `^tracktest: 1 tensor leaked \(64 B\) in tracker "scope-dropped", scope tensorlife.test=TestDrops#\d+ `+
				`\(1 handle: 0 live, 1 dropped without Free\):\n`, errs[0])
			assert.Regexp(t, fmt.Sprintf(`\n    tensor %d: int32\[4 4\], 64 B, kind tensor, device host, age [^,]+, `+
				`labels \{tensorlife.test=TestDrops#\d+\}, dropped without Free \(found by the garbage collector\)\n`, id), errs[0])
			assert.Contains(t, errs[0], "\nsite "+thisPackage+".dropTensor (helpers_test.go:")
			assert.Contains(t, errs[0], "  stack:\n    "+thisPackage+".dropTensor\n")
			assert.Contains(t, errs[0], "free it on every path")
		})
	}
}

func TestContextBoundsDroppedTensors(t *testing.T) {
	e := newEnv(t, "many-dropped")
	ft := newFakeT("TestDropsInALoop")
	ctx := tracktest.Context(ft, e.tr, scoped...)
	const n, listed = 1003, 1000 // a check lists at most 1000, as documented
	for range n {
		dropTensor(t, e, ctx)
	}
	collectDropped(t, e.tr, n, 0)
	ft.finish()
	require.Len(t, ft.Errors(), 1)
	assert.Regexp(t, `^tracktest: 1000 tensors leaked \(62\.5 KiB\) in tracker "many-dropped", scope tensorlife.test=TestDropsInALoop#\d+ `+
		`\(1000 handles: 0 live, 1000 dropped without Free, 3 more dropped, not listed\):\n`, ft.Errors()[0])
	assert.Equal(t, listed, strings.Count(ft.Errors()[0], "\n    tensor "))
}

// With ReclaimLeaks(false) dropped tensors stay live, flagged, and are all
// listed: none is counted again as "more, not listed".
func TestContextListsKeptDroppedTensorsOnce(t *testing.T) {
	e := newEnv(t, "kept-dropped", track.ReclaimLeaks(false))
	ft := newFakeT("TestKeptDrops")
	ctx := tracktest.Context(ft, e.tr, scoped...)
	const n = 1003
	for range n {
		dropTensor(t, e, ctx)
	}
	collectDropped(t, e.tr, n, n)
	ft.finish()
	require.Len(t, ft.Errors(), 1)
	assert.Contains(t, ft.Errors()[0], "1003 dropped without Free)")
	assert.NotContains(t, ft.Errors()[0], "more dropped")
}

func TestContextRejectsOptionsThatCannotApply(t *testing.T) {
	tests := []struct {
		name string
		opt  tracktest.ScopeOption
		msg  string
	}{
		{"IgnoreLabel of the scope label", tracktest.IgnoreLabel(tracktest.ScopeLabel, "x"), `IgnoreLabel("tensorlife.test", "x") cannot be used with Context`},
		{"invalid value", tracktest.MaxRetries(-3), "MaxRetries(-3)"},
		{"nil", nil, "nil option (passed to Context)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "bad")
			ft := newFakeT(t.Name())
			ctx := tracktest.Context(ft, e.tr, tt.opt)
			require.Len(t, ft.Errors(), 1, "the test fails at once")
			assert.Contains(t, ft.Errors()[0], "tracktest: invalid option")
			assert.Contains(t, ft.Errors()[0], tt.msg)
			assert.Empty(t, ft.cleanups, "no check is registered")
			_, tagged := track.LabelsFrom(ctx).Get(tracktest.ScopeLabel)
			assert.True(t, tagged, "the context is still usable")
		})
	}
}

func TestContextWithNilT(t *testing.T) {
	var out syncBuffer
	defer tracktest.SwapProcess(func(int) { t.Error("Context must not exit") }, &out)()
	ctx := tracktest.Context(nil, nil)
	require.NotNil(t, ctx)
	assert.Contains(t, out.String(), "Context called with a nil ScopeT")
}

// scopeOnlyT has Error and Cleanup only: the smallest ScopeT.
type scopeOnlyT struct {
	errors   []string
	cleanups []func()
}

func (s *scopeOnlyT) Error(args ...any) { s.errors = append(s.errors, fmt.Sprint(args...)) }
func (s *scopeOnlyT) Cleanup(fn func()) { s.cleanups = append(s.cleanups, fn) }
func (s *scopeOnlyT) finish() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// syncBuffer is a strings.Builder safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}

// A scope is a request: a tensor made under it and kept by a cache, which
// relabels it and takes it as its owner, is still the scope's leak.
func TestContextFindsTensorsACacheRelabeled(t *testing.T) {
	e := newEnv(t, "cached")
	ft := newFakeT("TestCached")
	ctx := tracktest.Context(ft, e.tr, scoped...)
	x := e.newTensor(t, ctx, 8)
	kept, err := x.Retain()
	require.NoError(t, err)
	require.NoError(t, kept.SetLabels(track.NewLabels("cache", "prompts")))
	require.NoError(t, kept.HandTo(&track.Owner{Name: "prompts", MaxBytes: 1 << 20}))
	require.NoError(t, x.Free()) // the cache's handle still holds it
	ft.finish()
	errs := ft.Errors()
	require.Len(t, errs, 1, "the cached tensor is the scope's leak")
	assert.Contains(t, errs[0], fmt.Sprintf("tensor %d:", x.ID()))
	assert.Contains(t, errs[0], "labels {cache=prompts}")
	require.NoError(t, kept.Free())
}

// TestContextFindsLeaksOfNestedRequests guards that a test's scope is a
// tree: code under test that scopes its own requests (WithRequest, or
// WithLabels on a cancellable context derived from the scope's) leaks into
// the test's scope, and the check names each leak.
func TestContextFindsLeaksOfNestedRequests(t *testing.T) {
	e := newEnv(t, "nested")
	ft := newFakeT("TestNested")
	ctx := tracktest.Context(ft, e.tr, scoped...)

	inner, end := track.WithRequest(ctx) // as a server's serve loop scopes each request
	viaRequest := e.newTensor(t, inner, 3)
	end()
	deeper, end2 := track.WithRequest(track.WithLabels(inner, "step", "1"))
	viaNested := e.newTensor(t, deeper, 5)
	end2()
	jobCtx, cancel := context.WithCancel(ctx)
	viaLabels := e.newTensor(t, track.WithLabels(jobCtx, "job", "j"), 7)
	cancel()
	clean := e.newTensor(t, inner, 11)
	require.NoError(t, clean.Free())

	ft.finish()
	errs := ft.Errors()
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0], "3 tensors leaked")
	for _, x := range []*tensor.Tensor{viaRequest, viaNested, viaLabels} {
		assert.Contains(t, errs[0], fmt.Sprintf("tensor %d:", x.ID()))
		require.NoError(t, x.Free())
	}
}
