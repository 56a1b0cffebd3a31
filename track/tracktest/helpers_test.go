package tracktest_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// The interfaces are small enough for the testing package's types.
var (
	_ tracktest.TestingT = (*testing.T)(nil)
	_ tracktest.TestingT = (*testing.B)(nil)
	_ tracktest.ScopeT   = (*testing.T)(nil)
	_ tracktest.ScopeT   = (*testing.B)(nil)
	_ tracktest.TestingM = (*testing.M)(nil)
)

// fakeT records what a check does to a test. It is safe for concurrent use,
// as a *testing.T is.
type fakeT struct {
	name string
	ctx  context.Context // returned by Context when set

	mu       sync.Mutex
	errors   []string
	helpers  int
	cleanups []func()
}

func newFakeT(name string) *fakeT { return &fakeT{name: name} }

func (f *fakeT) Error(args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprint(args...))
}

func (f *fakeT) Helper() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.helpers++
}

func (f *fakeT) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *fakeT) Name() string { return f.name }

// finish ends the fake test: cleanups run last registered first.
func (f *fakeT) finish() {
	f.mu.Lock()
	fns := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

func (f *fakeT) Errors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.errors...)
}

// contextT is a fakeT with testing.T's Context method.
type contextT struct{ *fakeT }

func (c contextT) Context() context.Context { return c.ctx }

// errorOnlyT has nothing but Error: the smallest TestingT.
type errorOnlyT struct{ errors []string }

func (e *errorOnlyT) Error(args ...any) { e.errors = append(e.errors, fmt.Sprint(args...)) }

// env is a fresh tracker over a host device, one per test.
type env struct {
	tr    *track.Tracker
	dev   *tensor.HostDevice
	alloc *tensor.DeviceAllocator
}

// newEnv builds an env; its tracker reports GC-found leaks to nobody, so
// test output stays quiet, unless opts say otherwise.
func newEnv(t testing.TB, name string, opts ...track.Option) *env {
	t.Helper()
	opts = append([]track.Option{track.Name(name), track.OnLeak(func(track.LeakReport) {})}, opts...)
	tr, err := track.New(opts...)
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	return &env{tr: tr, dev: dev, alloc: alloc}
}

// fast keeps failing checks short: a leak is found in a few milliseconds.
var (
	fast   = []tracktest.Option{tracktest.MaxRetries(3), tracktest.MaxSettle(20 * time.Millisecond)}
	scoped = []tracktest.ScopeOption{tracktest.MaxRetries(3), tracktest.MaxSettle(20 * time.Millisecond)}
)

func opts(extra ...tracktest.Option) []tracktest.Option {
	return append(append([]tracktest.Option(nil), fast...), extra...)
}

func scopedOpts(extra ...tracktest.ScopeOption) []tracktest.ScopeOption {
	return append(append([]tracktest.ScopeOption(nil), scoped...), extra...)
}

// newTensor makes a float32 tensor and fails the test if it cannot.
func (e *env) newTensor(t testing.TB, ctx context.Context, dims ...int) *tensor.Tensor {
	t.Helper()
	x, err := tensor.New(ctx, e.alloc, tensor.Float32, dims...)
	require.NoError(t, err)
	return x
}

// callerLine returns the line of the call to callerLine.
func callerLine() int {
	_, _, line, _ := runtime.Caller(1)
	return line
}

// dropTensor makes a 64-byte tensor, drops its handle without Free and
// returns its id.
//
//go:noinline
func dropTensor(t testing.TB, e *env, ctx context.Context) uint64 {
	x, err := tensor.New(ctx, e.alloc, tensor.Int32, 4, 4)
	require.NoError(t, err)
	return x.ID()
}

// collectDropped runs the collector until tr has found n dropped tensors
// and holds live tensors live, so that a reclaiming tracker has taken the
// dropped ones out of its live set before the test goes on.
func collectDropped(t testing.TB, tr *track.Tracker, n, live int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		runtime.GC()
		tot := tr.Totals()
		return tot.GCLeaks == n && tot.LiveCount == live
	}, 5*time.Second, time.Millisecond)
}

// noAutoGC turns automatic collection off for the test, so the collector
// runs only when a check asks: a dropped handle is then found exactly
// during the check, not at some earlier moment.
func noAutoGC(t *testing.T) {
	old := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(old) })
}

// withoutRetainers removes what TENSORLIFE_RETAINERS=1 adds to a report:
// the paths it names depend on how the program happens to hold its
// tensors, not on the report.
func withoutRetainers(report string) string {
	report = regexp.MustCompile(`(?m)^\s+kept alive by: .*\n`).ReplaceAllString(report, "")
	return regexp.MustCompile(`\nRetainers: .*$`).ReplaceAllString(report, "")
}
