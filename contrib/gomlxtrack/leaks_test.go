package gomlxtrack_test

// The leaks GoMLX's users reported, each found by the detector a user would
// reach for: the collector's reports (and tracktest) for outputs left to the
// garbage collector, the growth watcher and the outlived profile for outputs
// kept across requests, the watcher and the owners for an exec cache that
// grows with input shapes, and the books of a donation.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/contrib/gomlxtrack"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
	"github.com/tensorlife/tensorlife/track/watch"
)

// dropOutputs runs e and leaves its outputs to the garbage collector, as
// GoMLX code did before its PR #65: the line reports must name.
//
//go:noinline
func dropOutputs(ctx context.Context, e *graph.Exec) error {
	_, err := gomlxtrack.Exec(ctx, e, matrix(64, 1), matrix(64, 2))
	return err
}

func TestOutputsNeverFinalizedAreReportedDroppedAtTheExecLine(t *testing.T) {
	for _, reclaim := range []bool{true, false} {
		t.Run(fmt.Sprintf("reclaim=%v", reclaim), func(t *testing.T) {
			reports := make(chan track.LeakReport, 4)
			tr := newTracker(t, track.OnLeak(func(l track.LeakReport) { reports <- l }), track.ReclaimLeaks(reclaim))
			b := newBackend(t, tr)
			e := addExec(t, b)
			defer e.Finalize()

			require.NoError(t, dropOutputs(context.Background(), e))
			got := awaitLeak(t, reports)

			assert.Equal(t, testPkg+"dropOutputs", got.Site.Location().Function)
			assert.EqualValues(t, 64*64*4, got.Bytes)
			assert.Equal(t, gomlxtrack.KindBuffer, got.Kind)
			assert.Equal(t, reclaim, got.Reclaimed)
			assert.EqualValues(t, 1, tr.Totals().GCLeaks)
			if reclaim {
				assert.Empty(t, allocations(tr, gomlxtrack.KindBuffer), "finalized in the backend and released")
			} else {
				kept := allocations(tr, gomlxtrack.KindBuffer)
				require.Len(t, kept, 1, "kept, and shown leaked")
				assert.True(t, kept[0].Leaked)
			}
		})
	}
}

// fakeT is a TestingT that records what tracktest says.
type fakeT struct{ errors []string }

func (f *fakeT) Error(args ...any) { f.errors = append(f.errors, fmt.Sprint(args...)) }
func (f *fakeT) Helper()           {}

func TestTracktestFailsATestThatDropsOutputs(t *testing.T) {
	for _, reclaim := range []bool{true, false} {
		t.Run(fmt.Sprintf("reclaim=%v", reclaim), func(t *testing.T) {
			tr := newTracker(t, track.ReclaimLeaks(reclaim))
			b := newBackend(t, tr)
			e := addExec(t, b)
			defer e.Finalize()

			// The test a user writes: a scope of its own, in which the
			// outputs are dropped.
			ft := &fakeT{}
			scope := &scopedT{fakeT: ft}
			ctx := tracktest.Context(scope, tr)
			require.NoError(t, dropOutputs(ctx, e))
			scope.runCleanups()

			require.Len(t, ft.errors, 1, "the test fails")
			assert.Contains(t, ft.errors[0], "dropOutputs")
			assert.Contains(t, ft.errors[0], "leaks_test.go")
		})
	}
}

// scopedT is the fake a tracktest scope needs: a name and cleanups, run
// when the fake test ends.
type scopedT struct {
	*fakeT
	cleanups []func()
}

func (s *scopedT) Name() string     { return "TestUserDropsOutputs" }
func (s *scopedT) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }
func (s *scopedT) runCleanups() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// outputCache keeps every output across requests, as a service that caches
// results by request and never evicts does.
type outputCache struct{ kept []*tensors.Tensor }

// serve is one request of such a service; with fixed set, it frees what it
// computed before its request ends.
//
//go:noinline
func (c *outputCache) serve(tr *track.Tracker, e *graph.Exec, fixed bool) error {
	ctx, end := track.WithRequest(context.Background())
	defer end()
	outs, err := gomlxtrack.Exec(ctx, e, matrix(64, 1), matrix(64, 2)) // the line to change
	if err != nil {
		return err
	}
	if fixed {
		for _, x := range outs {
			if err := x.FinalizeAll(); err != nil {
				return err
			}
		}
		return nil
	}
	c.kept = append(c.kept, outs...)
	return nil
}

func TestOutputsKeptAcrossRequestsAreNamedByTheWatcherAndTheOutlivedProfile(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		t.Run(map[bool]string{false: "leak", true: "fixed"}[fixed], func(t *testing.T) {
			tr := newTracker(t)
			b := newBackend(t, tr)
			e := addExec(t, b)
			defer e.Finalize()
			w, err := watch.New(tr, watch.OnSuspect(func(watch.Suspect) {}))
			require.NoError(t, err)
			c := &outputCache{}
			defer func() { finalizeAll(t, c.kept) }()

			flaggedAt := 0
			for i := 1; i <= 8; i++ {
				require.NoError(t, c.serve(tr, e, fixed))
				require.NoError(t, w.Tick())
				if flaggedAt == 0 && w.SuspectCount() > 0 {
					flaggedAt = i
				}
			}
			if fixed {
				assert.Zero(t, w.SuspectCount(), "%v", w.Suspects())
				return
			}
			require.NotZero(t, flaggedAt, "named within 8 requests")
			s := w.Suspects()
			require.Len(t, s, 1)
			assert.Equal(t, testPkg+"(*outputCache).serve", s[0].Site.Location().Function)
			assert.EqualValues(t, 8*64*64*4, s[0].OutlivedBytes)

			assert.Equal(t, testPkg+"(*outputCache).serve", topOutlived(t, tr))
		})
	}
}

// topOutlived is the function `go tool pprof -top` puts first in tr's
// ?outlived=1 profile: the most in-use bytes by leaf function.
func topOutlived(t *testing.T, tr *track.Tracker) string {
	t.Helper()
	p, err := pprofexport.Profile(tr.Snapshot(), pprofexport.Outlived())
	require.NoError(t, err)
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			idx = i
		}
	}
	require.GreaterOrEqual(t, idx, 0)
	flat := map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 {
			flat[s.Location[0].Line[0].Function.Name] += s.Value[idx]
		}
	}
	top, most := "", int64(-1)
	for fn, v := range flat {
		if v > most || (v == most && fn < top) {
			top, most = fn, v
		}
	}
	return top
}

// weights are a model's constant weights, compiled into each program.
var weights = matrix(64, 0.5)

// project is a model whose program holds its weights as a constant.
func project(x *graph.Node) *graph.Node {
	return graph.MatMul(x, graph.Const(x.Graph(), weights))
}

// predict serves one request with a batch of n rows: each new n compiles a
// new program, which GoMLX's exec cache keeps (hugot's shape).
//
//go:noinline
func predict(e *graph.Exec, n int) error {
	ctx, end := track.WithRequest(context.Background())
	defer end()
	batch := make([][]float32, n)
	for i := range batch {
		batch[i] = make([]float32, 64)
	}
	outs, err := gomlxtrack.Exec(ctx, e, batch) // compiles for each new shape
	if err != nil {
		return err
	}
	for _, x := range outs {
		if err := x.FinalizeAll(); err != nil {
			return err
		}
	}
	return nil
}

func TestAnExecCacheGrowingWithInputShapesIsNamed(t *testing.T) {
	tr := newTracker(t)
	b := newBackend(t, tr)
	e, err := graph.NewExec(b, project)
	require.NoError(t, err)
	e.SetMaxCache(-1)
	defer e.Finalize()
	w, err := watch.New(tr, watch.OnSuspect(func(watch.Suspect) {}))
	require.NoError(t, err)

	for n := 1; n <= 8; n++ {
		require.NoError(t, predict(e, n))
		require.NoError(t, w.Tick())
	}
	s := w.Suspects()
	require.Len(t, s, 1, "the compiled programs grow")
	assert.Equal(t, testPkg+"predict", s[0].Site.Location().Function, "the line whose calls compile")
	assert.GreaterOrEqual(t, s[0].OutlivedBytes, int64(8*64*64*4), "each program keeps its copy of the weights")

	var programs *track.OwnerStats
	for _, o := range tr.Owners() {
		if strings.HasPrefix(o.Name, "gomlx programs") {
			programs = &o
		}
	}
	require.NotNil(t, programs, "the programs are booked to the backend's owner")
	assert.EqualValues(t, 8, programs.Count)
	assert.Empty(t, allocations(tr, gomlxtrack.KindBuffer), "every output was finalized")

	e.Finalize()
	assert.Empty(t, allocations(tr, gomlxtrack.KindProgram), "Exec.Finalize releases its programs")
}

// step is one request of a loop that donates its state to the program, as
// GoMLX's training loops and KV updates do.
//
//go:noinline
func step(t *testing.T, b backends.Backend, e *graph.Exec, state *tensors.Tensor) *tensors.Tensor {
	ctx, end := track.WithRequest(context.Background())
	defer end()
	donated, err := graph.DonateTensorBuffer(state, b, 0)
	require.NoError(t, err)
	outs, err := gomlxtrack.Exec(ctx, e, donated, matrix(16, 1)) // a Go value: donated too
	require.NoError(t, err)
	return outs[0]
}

func TestDonationLeavesNoOutlivedBytesAndNoDoubleFree(t *testing.T) {
	tr := newTracker(t)
	defer tracktest.VerifyNone(t, tr)
	b := newBackend(t, tr)
	e := addExec(t, b)
	defer e.Finalize()

	state := materialize(t, b, matrix(16, 0), false)
	for range 10 {
		next := step(t, b, e, state)
		state = next
		got := allocations(tr, gomlxtrack.KindBuffer)
		require.Len(t, got, 1, "the state alone: each donated input left the books when the program took it")
		assert.EqualValues(t, 16*16*4, got[0].Bytes)
		// The state carried to the next step outlives the step that made
		// it, as it should; nothing a step donated outlived anything.
		assert.EqualValues(t, 16*16*4, tr.Totals().OutlivedBytes)
	}
	assert.Equal(t, float32(10), state.Value().([][]float32)[0][0])
	totals := tr.Totals()
	assert.EqualValues(t, 0, totals.Misuse, "no double free")
	require.NoError(t, state.FinalizeAll())
	assert.EqualValues(t, 0, tr.Totals().OutlivedBytes)
	assert.EqualValues(t, 0, tr.Totals().LiveBytes, "the programs hold no constants")
}
