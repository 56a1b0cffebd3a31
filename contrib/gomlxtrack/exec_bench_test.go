package gomlxtrack_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/tensorlife/tensorlife/contrib/gomlxtrack"
	"github.com/tensorlife/tensorlife/track"
)

// BenchmarkTrackedExec times a tracked Exec of a 64×64 float32 add (the
// adapter's Exec under a request, on a wrapped backend: the output booked
// and rebooked, its cleanup, the program's inputs unwrapped) against the
// same Exec of the same program on the bare backend, each followed by the
// output's FinalizeAll, in alternating rounds of 50 calls; it reports the
// median of the per-round ratios as x-tracked (the goal: at most 1.25).
func BenchmarkTrackedExec(b *testing.B) {
	tr, err := track.New(track.Name("bench"))
	if err != nil {
		b.Fatal(err)
	}
	bare, err := simplego.New("")
	if err != nil {
		b.Fatal(err)
	}
	inner, err := simplego.New("")
	if err != nil {
		b.Fatal(err)
	}
	wrapped := gomlxtrack.Wrap(inner, tr)
	add := func(x, y *graph.Node) *graph.Node { return graph.Add(x, y) }
	setup := func(e *graph.Exec, err error) (*graph.Exec, *tensors.Tensor, *tensors.Tensor) {
		if err != nil {
			b.Fatal(err)
		}
		x, y := tensors.FromValue(matrix(64, 1)), tensors.FromValue(matrix(64, 2))
		return e, x, y
	}
	eBare, xBare, yBare := setup(graph.NewExec(bare, add))
	eTracked, xTracked, yTracked := setup(graph.NewExec(wrapped, add))
	ctx, end := track.WithRequest(context.Background())
	defer end()

	untracked := func() {
		outs, err := eBare.Exec(xBare, yBare)
		if err != nil {
			b.Fatal(err)
		}
		_ = outs[0].FinalizeAll()
	}
	tracked := func() {
		outs, err := gomlxtrack.Exec(ctx, eTracked, xTracked, yTracked)
		if err != nil {
			b.Fatal(err)
		}
		_ = outs[0].FinalizeAll()
	}
	untracked() // compile both programs and put the inputs on the device
	tracked()

	const roundOps = 50
	b.ReportAllocs()
	b.ResetTimer()
	var ratios []float64
	var trackedTotal, bareTotal time.Duration
	for done := 0; done < b.N; done += roundOps {
		n := min(roundOps, b.N-done)
		first, second := tracked, untracked
		if len(ratios)%2 == 1 {
			first, second = untracked, tracked
		}
		d1, d2 := timeCalls(n, first), timeCalls(n, second)
		t, u := d1, d2
		if len(ratios)%2 == 1 {
			t, u = d2, d1
		}
		trackedTotal += t
		bareTotal += u
		if u > 0 {
			ratios = append(ratios, float64(t)/float64(u))
		}
	}
	b.StopTimer()
	if len(ratios) > 0 {
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "x-tracked")
		b.ReportMetric(float64(trackedTotal.Nanoseconds())/float64(b.N), "tracked-ns/op")
		b.ReportMetric(float64(bareTotal.Nanoseconds())/float64(b.N), "untracked-ns/op")
	}
	for _, x := range []*tensors.Tensor{xBare, yBare, xTracked, yTracked} {
		_ = x.FinalizeAll()
	}
	eBare.Finalize()
	eTracked.Finalize()
}

// timeCalls is the time n calls of f take.
func timeCalls(n int, f func()) time.Duration {
	start := time.Now()
	for range n {
		f()
	}
	return time.Since(start)
}
