package gomlxtrack_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/contrib/gomlxtrack"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// Twelve requests share one backend and one program, as a server's handlers
// do: each output is its own request's, with that request's labels.
func TestConcurrentExecsBookEachOutputToItsOwnRequest(t *testing.T) {
	tr := newTracker(t)
	defer tracktest.VerifyNone(t, tr)
	b := newBackend(t, tr)
	e := addExec(t, b)
	defer e.Finalize()

	const requests = 12
	outs := make([][]*tensors.Tensor, requests)
	ends := make([]context.CancelFunc, requests)
	var wg sync.WaitGroup
	for i := range requests {
		ctx, end := track.WithRequest(track.WithLabels(context.Background(), "request", fmt.Sprint(i)))
		ends[i] = end
		wg.Go(func() {
			o, err := gomlxtrack.Exec(ctx, e, matrix(8, float32(i)), matrix(8, 1))
			assert.NoError(t, err)
			outs[i] = o
		})
	}
	wg.Wait()

	got := allocations(tr, gomlxtrack.KindBuffer)
	require.Len(t, got, requests)
	seen := map[string]bool{}
	for _, a := range got {
		id, ok := a.Labels.Get("request")
		require.True(t, ok)
		seen[id] = true
		assert.True(t, a.InFlight)
		assert.Equal(t, testPkg+"TestConcurrentExecsBookEachOutputToItsOwnRequest.func1", a.Site.Location().Function)
	}
	assert.Len(t, seen, requests, "one output a request")
	for i := range requests {
		assert.Equal(t, float32(i+1), outs[i][0].Value().([][]float32)[0][0], "its own result")
		ends[i]()
		finalizeAll(t, outs[i])
	}
}

// Past the tracker's MaxSites every stack is its overflow site, which names
// no frame: the outputs are booked under no request first, then moved to
// Exec's.
func TestExecBooksUnderItsRequestPastMaxSites(t *testing.T) {
	tr := newTracker(t, track.MaxSites(1))
	defer tracktest.VerifyNone(t, tr)
	b := newBackend(t, tr)
	e := addExec(t, b)
	defer e.Finalize()
	_ = materialize(t, b, []float32{1}, false).FinalizeAll() // the one site

	ctx, end := track.WithRequest(context.Background())
	outs := exec(t, ctx, e, matrix(4, 1), matrix(4, 1))
	got := allocations(tr, gomlxtrack.KindBuffer)
	require.Len(t, got, 1)
	assert.True(t, got[0].InFlight, "its request's all the same")
	end()
	finalizeAll(t, outs)
	assert.EqualValues(t, 0, tr.Totals().Misuse)
}
