package tracktest_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/fpstack"
	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

//go:noinline
func firstFree(x *tensor.Tensor) error { return x.Free() }

//go:noinline
func secondFree(x *tensor.Tensor) error { return x.Free() }

// doubleFree makes a tensor under ctx and frees it twice, through
// firstFree and secondFree. Under invariants the second Free panics, which
// the test recovers.
//
//go:noinline
func doubleFree(t testing.TB, e *env, ctx context.Context) {
	t.Helper()
	x := e.newTensor(t, ctx, 4)
	require.NoError(t, firstFree(x))
	err, _ := invariants.Recover(func() error { return secondFree(x) })
	require.ErrorIs(t, err, tensor.ErrDoubleFree)
}

// assertNamesThreeLines checks a misuse report names the allocation and
// both Free lines.
func assertNamesThreeLines(t *testing.T, report string) {
	t.Helper()
	assert.Contains(t, report, "double free")
	assert.Contains(t, report, "allocated at: github.com/tensorlife/tensorlife/track/tracktest_test.(*env).newTensor")
	assert.Contains(t, report, "first freed at: github.com/tensorlife/tensorlife/track/tracktest_test.firstFree")
	assert.Contains(t, report, "freed again at: github.com/tensorlife/tensorlife/track/tracktest_test.secondFree")
	assert.Contains(t, report, "misuse_test.go:")
}

func TestVerifyNoneFailsOnDoubleFree(t *testing.T) {
	e := newEnv(t, "misuse")
	doubleFree(t, e, context.Background())

	ft := newFakeT(t.Name())
	tracktest.VerifyNone(ft, e.tr, opts()...)
	require.Len(t, ft.Errors(), 1, "no leak, one double free")
	assertNamesThreeLines(t, ft.Errors()[0])

	again := newFakeT(t.Name())
	tracktest.VerifyNone(again, e.tr, opts()...)
	assert.Empty(t, again.Errors(), "a double free is reported by one check, not every later one")

	doubleFree(t, e, context.Background())
	allowed := newFakeT(t.Name())
	tracktest.VerifyNone(allowed, e.tr, opts(tracktest.AllowMisuse())...)
	assert.Empty(t, allowed.Errors(), "AllowMisuse lets it pass")
}

func TestFindReturnsMisuseError(t *testing.T) {
	e := newEnv(t, "misuse")
	doubleFree(t, e, context.Background())
	live := e.newTensor(t, context.Background(), 2)

	err := tracktest.Find(e.tr, opts()...)
	require.ErrorIs(t, err, tracktest.ErrMisuse)
	require.ErrorIs(t, err, tracktest.ErrLeaked, "a leak and a double free are both reported")
	var me *tracktest.MisuseError
	require.ErrorAs(t, err, &me)
	require.Len(t, me.Misuses, 1)
	assert.Equal(t, "github.com/tensorlife/tensorlife/track/tracktest_test.secondFree",
		me.Misuses[0].SecondFree.Location().Function)
	assertNamesThreeLines(t, me.Error())

	require.NoError(t, live.Free())
	assert.NoError(t, tracktest.Find(e.tr, opts()...), "reported once")
}

func TestContextFailsOnlyTheScopeThatDoubleFreed(t *testing.T) {
	e := newEnv(t, "misuse")
	guilty, innocent := newFakeT("guilty"), newFakeT("innocent")
	gctx := tracktest.Context(guilty, e.tr, scopedOpts()...)
	ictx := tracktest.Context(innocent, e.tr, scopedOpts()...)
	x := e.newTensor(t, ictx, 4)
	doubleFree(t, e, gctx)
	require.NoError(t, x.Free())
	guilty.finish()
	innocent.finish()
	require.Len(t, guilty.Errors(), 1)
	assertNamesThreeLines(t, guilty.Errors()[0])
	assert.Empty(t, innocent.Errors(), "the other scope's double free is not this one's")

	allowed := newFakeT("allowed")
	actx := tracktest.Context(allowed, e.tr, scopedOpts(tracktest.AllowMisuse())...)
	doubleFree(t, e, actx)
	allowed.finish()
	assert.Empty(t, allowed.Errors())
}

func TestVerifyTestMainFailsOnDoubleFree(t *testing.T) {
	e := newEnv(t, "misuse")
	doubleFree(t, e, context.Background()) // before the tests: not theirs
	code, out, _ := verifyTestMainOutput(t, e.tr, func() int { return 0 }, opts()...)
	assert.Zero(t, code, "a double free before the tests ran is not theirs")
	assert.Empty(t, out)

	code, out, _ = verifyTestMainOutput(t, e.tr, func() int {
		doubleFree(t, e, context.Background())
		return 0
	}, opts()...)
	assert.Equal(t, 1, code)
	assertNamesThreeLines(t, out)

	code, _, _ = verifyTestMainOutput(t, e.tr, func() int {
		doubleFree(t, e, context.Background())
		return 0
	}, opts(tracktest.AllowMisuse())...)
	assert.Zero(t, code)
}

// lineT is a TestingT that, like the testing package, reports a failure at
// the first frame that did not call Helper, and records that frame's
// function. Its own methods count as helpers, as testing's do.
type lineT struct {
	mu      sync.Mutex
	helpers map[string]bool
	at      []string
	cleanup []func()
}

func (l *lineT) Helper() {
	pc, _, _, _ := runtime.Caller(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.helpers == nil {
		l.helpers = map[string]bool{}
	}
	l.helpers[runtime.FuncForPC(pc).Name()] = true
}

func (l *lineT) Error(...any) {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		f, more := frames.Next()
		if !l.helpers[f.Function] && !strings.Contains(f.Function, "(*lineT)") {
			l.at = append(l.at, f.Function)
			return
		}
		if !more {
			return
		}
	}
}

func (l *lineT) Cleanup(f func()) { l.cleanup = append(l.cleanup, f) }

func (l *lineT) finish() {
	for i := len(l.cleanup) - 1; i >= 0; i-- {
		l.cleanup[i]()
	}
}

func TestFailuresPointAtTheTestLine(t *testing.T) {
	e := newEnv(t, "lines")
	here := "github.com/tensorlife/tensorlife/track/tracktest_test.TestFailuresPointAtTheTestLine"

	leak := e.newTensor(t, context.Background(), 2)
	lt := &lineT{}
	tracktest.VerifyNone(lt, e.tr, opts()...)
	assert.Equal(t, []string{here}, lt.at, "VerifyNone fails at the test's line")
	require.NoError(t, leak.Free())

	lt = &lineT{}
	tracktest.VerifyNone(lt, e.tr, tracktest.MaxRetries(-1))
	assert.Equal(t, []string{here}, lt.at, "an invalid option fails at the test's line")

	lt = &lineT{}
	ctx := tracktest.Context(lt, e.tr, scopedOpts()...)
	doubleFree(t, e, ctx)
	scoped := e.newTensor(t, ctx, 2)
	lt.finish()
	assert.Equal(t, []string{here, here}, lt.at, "a scope's leak and misuse fail at the test's line")
	require.NoError(t, scoped.Free())
	assert.NoError(t, tracktest.Find(e.tr, opts(tracktest.AllowMisuse())...), "nothing left live")
}

// deferredFirstFree frees x by a deferred call.
//
//go:noinline
func deferredFirstFree(x *tensor.Tensor) {
	defer x.Free() // the line a report names
}

// A misuse report names a deferred Free at its defer statement and says
// it was deferred.
func TestMisuseReportSaysAFreeWasDeferred(t *testing.T) {
	if !fpstack.Enabled() {
		t.Skip("a deferred Free is told apart by a frame-pointer walk, which is off")
	}
	e := newEnv(t, "deferred")
	x := e.newTensor(t, context.Background(), 4)
	deferredFirstFree(x)
	err, _ := invariants.Recover(func() error { return secondFree(x) })
	require.ErrorIs(t, err, tensor.ErrDoubleFree)
	err = tracktest.Find(e.tr, opts()...)
	require.ErrorIs(t, err, tracktest.ErrMisuse)
	assert.Regexp(t, `\n  first freed by a deferred Free at: github.com/tensorlife/tensorlife/track/tracktest_test.deferredFirstFree\n      .+/misuse_test.go:\d+\n`, err.Error())
	assert.Contains(t, err.Error(), "freed again at: github.com/tensorlife/tensorlife/track/tracktest_test.secondFree")
	_, file, _, _ := runtime.Caller(0)
	var me *tracktest.MisuseError
	require.ErrorAs(t, err, &me)
	loc := me.Misuses[0].FirstFree.Location()
	assert.Equal(t, file, loc.File)
	assert.Equal(t, "defer x.Free() // the line a report names", strings.TrimSpace(sourceLine(t, file, loc.Line)))
}

// sourceLine returns line n of file.
func sourceLine(t *testing.T, file string, n int) string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	require.Less(t, n-1, len(lines))
	return lines[n-1]
}
