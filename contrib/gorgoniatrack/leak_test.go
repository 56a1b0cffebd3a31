package gorgoniatrack_test

// The leaks gorgonia's users write, each under the detector they would
// reach for: a Dense dropped without Free (the collector's report, and
// tracktest), and a Dense kept in a global across requests (the growth
// watcher, and tracktest). Each has its fixed variant, which passes.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gorgonia "gorgonia.org/tensor"

	"github.com/tensorlife/tensorlife/contrib/gorgoniatrack"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
	"github.com/tensorlife/tensorlife/track/watch"
)

// dropDense makes a Dense with New and drops it without Free; it returns
// the line of New.
//
//go:noinline
func dropDense(t testing.TB, ctx context.Context, eng *gorgoniatrack.Engine) (file string, line int) {
	file, line = here()
	d, err := gorgoniatrack.New(ctx, eng, gorgonia.Float32, 16, 16)
	require.NoError(t, err)
	require.NoError(t, d.Memset(float32(1)))
	return file, line + 1
}

// dropResult makes an operation's result, watches it, frees the inputs
// and drops the result; it returns the line of the operation.
//
//go:noinline
func dropResult(t testing.TB, ctx context.Context, eng *gorgoniatrack.Engine) (file string, line int) {
	a, err := gorgoniatrack.FromSlice(ctx, eng, []float64{1, 2, 3})
	require.NoError(t, err)
	file, line = here()
	out, err := a.Mul(a)
	require.NoError(t, err)
	require.NoError(t, gorgoniatrack.Watch(out))
	require.NoError(t, gorgoniatrack.Free(a))
	return file, line + 1
}

// Collector: a Dense made by New and dropped is reported dropped at the
// line of New, and on a reclaiming tracker its memory goes back.
func TestOnLeakReportsADroppedDenseAtItsLine(t *testing.T) {
	for _, reclaim := range []bool{true, false} {
		t.Run(map[bool]string{true: "reclaim", false: "keep"}[reclaim], func(t *testing.T) {
			reports := make(chan track.LeakReport, 4)
			e := newEnv(t, 1<<20, track.OnLeak(func(r track.LeakReport) { reports <- r }), track.ReclaimLeaks(reclaim))
			file, line := dropDense(t, context.Background(), e.eng)

			got := awaitLeak(t, reports)
			loc := got.Site.Location()
			assert.Equal(t, file, loc.File)
			assert.Equal(t, line, loc.Line, "reported at %s", loc)
			assert.Equal(t, file, got.Holder.Site.Location().File, "the dropped handle is New's")
			assert.EqualValues(t, 16*16*4, got.Bytes)
			assert.Equal(t, "float32", got.DType)
			assert.Equal(t, []int{16, 16}, got.Shape)
			assert.Equal(t, reclaim, got.Reclaimed)
			if reclaim {
				assert.Empty(t, e.live(t))
				assert.Zero(t, e.pool.Stats().Active, "the memory went back to the pool")
			} else {
				live := e.live(t)
				require.Len(t, live, 1)
				assert.True(t, live[0].Leaked)
			}
		})
	}
}

// Collector: an operation's result that Watch was given is reported at
// the line of the operation when dropped.
func TestOnLeakReportsAWatchedResultAtTheOperationsLine(t *testing.T) {
	reports := make(chan track.LeakReport, 4)
	e := newEnv(t, 1<<20, track.OnLeak(func(r track.LeakReport) { reports <- r }))
	file, line := dropResult(t, context.Background(), e.eng)
	got := awaitLeak(t, reports)
	assert.Equal(t, fmt.Sprintf("%s:%d", file, line), fmt.Sprintf("%s:%d", got.Site.Location().File, got.Site.Location().Line))
	assert.Empty(t, e.live(t))
}

// A view keeps its parent's memory: the parent dropped under a live view
// is not reported, and its block is not handed out again, until the view
// goes too.
func TestAViewKeepsADroppedParentsMemory(t *testing.T) {
	reports := make(chan track.LeakReport, 4)
	e := newEnv(t, 1<<20, track.OnLeak(func(r track.LeakReport) { reports <- r }))
	view := viewOfDropped(t, e.eng)
	for range 3 {
		collect()
	}
	require.Empty(t, reports, "the view still uses the memory")
	require.Len(t, e.live(t), 1)
	assert.Equal(t, []float32{2, 3}, view.Data(), "the view reads its parent's memory")
	view = nil
	_ = view
	got := awaitLeak(t, reports)
	assert.EqualValues(t, 4*4, got.Bytes)
}

//go:noinline
func viewOfDropped(t *testing.T, eng *gorgoniatrack.Engine) *gorgonia.Dense {
	d, err := gorgoniatrack.FromSlice(context.Background(), eng, []float32{1, 2, 3, 4})
	require.NoError(t, err)
	v, err := d.Slice(gorgonia.S(1, 3))
	require.NoError(t, err)
	return v.(*gorgonia.Dense)
}

// fakeT is a test that records its failures and runs its cleanups when
// told: tracktest's verdict on a test, read as the test itself would get it.
type fakeT struct {
	name     string
	errors   []string
	cleanups []func()
}

func (f *fakeT) Error(args ...any) { f.errors = append(f.errors, fmt.Sprint(args...)) }
func (f *fakeT) Helper()           {}
func (f *fakeT) Name() string      { return f.name }
func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) failures() string  { return strings.Join(f.errors, "\n") }
func (f *fakeT) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// tracktest: a test that drops a Dense fails, naming the line of New; the
// test that frees it passes.
func TestTracktestFailsATestThatDropsADense(t *testing.T) {
	e := newEnv(t, 1<<20)

	leaky := &fakeT{name: "TestLeaky"}
	file, line := dropDense(t, tracktest.Context(leaky, e.tr), e.eng)
	leaky.end()
	require.NotEmpty(t, leaky.errors, "tracktest passed a test that dropped a Dense")
	assert.Contains(t, leaky.failures(), "dropped")
	assert.Contains(t, leaky.failures(), fmt.Sprintf("%s:%d", file, line))

	fixed := &fakeT{name: "TestFixed"}
	ctx := tracktest.Context(fixed, e.tr)
	d, err := gorgoniatrack.New(ctx, e.eng, gorgonia.Float32, 16, 16)
	require.NoError(t, err)
	require.NoError(t, gorgoniatrack.Free(d))
	fixed.end()
	assert.Empty(t, fixed.errors)
}

// kept is where the leaky handler keeps its Denses: a package variable, as
// a cache that never evicts.
var kept []*gorgonia.Dense

// serve runs one request of a handler that makes a Dense per request under
// the request's context, and keeps it (leak) or frees it; it returns the
// line that makes the Dense.
//
//go:noinline
func serve(t testing.TB, eng *gorgoniatrack.Engine, w *watch.Watcher, leak, withEngine bool) (file string, line int) {
	ctx, end := track.WithRequest(context.Background())
	var d *gorgonia.Dense
	var err error
	if withEngine {
		file, line = here()
		d = gorgonia.New(gorgonia.WithShape(32, 32), gorgonia.Of(gorgonia.Float64), gorgonia.WithEngine(eng.For(ctx)))
	} else {
		file, line = here()
		d, err = gorgoniatrack.New(ctx, eng, gorgonia.Float64, 32, 32)
	}
	require.NoError(t, err)
	if leak {
		kept = append(kept, d)
	} else {
		require.NoError(t, gorgoniatrack.Free(d))
	}
	end()
	require.NoError(t, w.Tick())
	return file, line + 1
}

// Watcher: Denses kept in a global across requests make their line a
// suspect within 8 requests, and tracktest fails the test; freed, there is
// no suspect and tracktest passes. A Dense made WithEngine(eng.For(ctx))
// is judged the same as one made by New.
func TestWatcherNamesADenseKeptGlobally(t *testing.T) {
	for _, withEngine := range []bool{false, true} {
		for _, leak := range []bool{true, false} {
			name := map[bool]string{false: "New", true: "WithEngine"}[withEngine] + "/" + map[bool]string{true: "leak", false: "fixed"}[leak]
			t.Run(name, func(t *testing.T) {
				t.Cleanup(func() { kept = nil })
				e := newEnv(t, 8<<20)
				var suspects []watch.Suspect
				w, err := watch.New(e.tr, watch.OnSuspect(func(s watch.Suspect) { suspects = append(suspects, s) }))
				require.NoError(t, err)

				var file string
				var line, flaggedAt int
				for i := 1; i <= 16; i++ {
					file, line = serve(t, e.eng, w, leak, withEngine)
					if flaggedAt == 0 && len(suspects) > 0 {
						flaggedAt = i
					}
				}
				check := &fakeT{name: t.Name()}
				tracktest.VerifyNone(check, e.tr, tracktest.MaxSettle(0))
				if !leak {
					assert.Empty(t, suspects)
					assert.Empty(t, check.errors)
					return
				}
				require.NotEmpty(t, suspects, "no suspect after 16 requests")
				assert.LessOrEqual(t, flaggedAt, 8, "flagged at request %d", flaggedAt)
				loc := suspects[0].Site.Location()
				assert.Equal(t, fmt.Sprintf("%s:%d", file, line), fmt.Sprintf("%s:%d", loc.File, loc.Line))
				require.NotEmpty(t, check.errors, "tracktest passed a test that kept its Denses")
				assert.Contains(t, check.failures(), fmt.Sprintf("%s:%d", file, line))
				for _, d := range kept {
					require.NoError(t, gorgoniatrack.Free(d))
				}
			})
		}
	}
}

// A cache that keeps Denses on purpose hands them to a bounded owner: the
// watcher then names no suspect however many requests it keeps them
// across, and the owner's books hold them.
func TestDensesHandedToABoundedOwnerAreNoSuspects(t *testing.T) {
	e := newEnv(t, 8<<20)
	var suspects []watch.Suspect
	w, err := watch.New(e.tr, watch.OnSuspect(func(s watch.Suspect) { suspects = append(suspects, s) }))
	require.NoError(t, err)
	cache := &track.Owner{Name: "score cache", MaxBytes: 1 << 20}
	var held []*gorgonia.Dense
	for range 16 {
		ctx, end := track.WithRequest(context.Background())
		d, err := gorgoniatrack.New(ctx, e.eng, gorgonia.Float64, 32, 32)
		require.NoError(t, err)
		require.NoError(t, gorgoniatrack.HandTo(d, cache))
		held = append(held, d)
		end()
		require.NoError(t, w.Tick())
	}
	assert.Empty(t, suspects)
	var owned int64
	for _, o := range e.tr.Owners() {
		if o.Name == cache.Name {
			owned = o.Bytes
		}
	}
	assert.EqualValues(t, 16*32*32*8, owned)

	require.NoError(t, gorgoniatrack.HandBack(held[0]))
	for _, d := range held {
		require.NoError(t, gorgoniatrack.Free(d))
	}
	assert.ErrorIs(t, gorgoniatrack.HandTo(held[0], cache), tensor.ErrInvalidPointer, "a freed Dense")
	tracktest.VerifyNone(t, e.tr)
}
