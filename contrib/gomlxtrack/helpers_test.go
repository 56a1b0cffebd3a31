package gomlxtrack_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/contrib/gomlxtrack"
	"github.com/tensorlife/tensorlife/track"
)

// testPkg is the package of these tests, as sites name its functions.
const testPkg = "github.com/tensorlife/tensorlife/contrib/gomlxtrack_test."

// newTracker is a tracker of the test's own, which never logs a leak.
func newTracker(t *testing.T, opts ...track.Option) *track.Tracker {
	t.Helper()
	opts = append([]track.Option{track.Name(t.Name()), track.OnLeak(func(track.LeakReport) {})}, opts...)
	tr, err := track.New(opts...)
	require.NoError(t, err)
	return tr
}

// newBackend is GoMLX's pure-Go backend wrapped for tr.
func newBackend(t *testing.T, tr *track.Tracker) backends.Backend {
	t.Helper()
	inner, err := simplego.New("")
	require.NoError(t, err)
	return gomlxtrack.Wrap(inner, tr)
}

// addExec is a program that adds its two inputs.
func addExec(t *testing.T, b backends.Backend) *graph.Exec {
	t.Helper()
	e, err := graph.NewExec(b, func(x, y *graph.Node) *graph.Node { return graph.Add(x, y) })
	require.NoError(t, err)
	return e
}

// matrix is an n×n float32 matrix of v.
func matrix(n int, v float32) [][]float32 {
	m := make([][]float32, n)
	for i := range m {
		m[i] = make([]float32, n)
		for j := range m[i] {
			m[i][j] = v
		}
	}
	return m
}

// finalizeAll finalizes ts, as a careful caller does.
func finalizeAll(t *testing.T, ts []*tensors.Tensor) {
	t.Helper()
	for _, x := range ts {
		require.NoError(t, x.FinalizeAll())
	}
}

// awaitLeak runs the collector and waits for the report it makes: the
// cleanup that reports runs on the runtime's goroutine, after the cycle.
func awaitLeak(t *testing.T, reports <-chan track.LeakReport) track.LeakReport {
	t.Helper()
	runtime.GC()
	runtime.GC()
	select {
	case l := <-reports:
		return l
	case <-t.Context().Done():
		t.Fatal("no leak report")
		return track.LeakReport{}
	}
}

// exec runs e under ctx through the adapter: the line sites name.
//
//go:noinline
func exec(t *testing.T, ctx context.Context, e *graph.Exec, args ...any) []*tensors.Tensor {
	t.Helper()
	outs, err := gomlxtrack.Exec(ctx, e, args...)
	require.NoError(t, err)
	return outs
}
