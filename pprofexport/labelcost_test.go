package pprofexport_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

// TestLabelsShownNowhereCostNothing serves 50 concurrent profile requests
// over 100k live tensors that each carry a request id of their own: a
// profile that shows no request label groups by none, so the requests
// together allocate less than 64 MiB, where grouping by the ids took
// hundreds of MiB for one.
func TestLabelsShownNowhereCostNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("100k tensors")
	}
	tr, err := track.New(track.Name("labelled"))
	require.NoError(t, err)
	recs := make([]track.Record, 100_000)
	meta := track.InternMeta("activation", "host", "float16", []int{64})
	for i := range recs {
		ctx := track.WithLabels(context.Background(), "request", fmt.Sprintf("req-%08d", i))
		recs[i].Bytes, recs[i].Meta = 128, meta
		require.NoError(t, tr.Books().Record(ctx, &recs[i], 0))
	}
	defer func() {
		for i := range recs {
			require.NoError(t, (&recs[i]).Release())
		}
	}()
	srv := serve(t, newHandler(t, tr, pprofexport.MaxConcurrentProfiles(50)))

	const requests = 50
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	statuses := make([]int, requests)
	for i := range requests {
		wg.Go(func() {
			resp, err := http.Get(srv.URL + tensorsPath)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, s := range statuses {
		assert.Equal(t, http.StatusOK, s, "request %d", i)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("50 profiles of 100k uniquely labelled tensors allocated %.1f MiB", float64(allocated)/(1<<20))
	assert.Less(t, allocated, uint64(64<<20), "bounded whatever the labels hold")

	p := getProfile(t, srv.URL+tensorsPath)
	assert.Len(t, p.Sample, 2, "one live sample and one alloc sample: the ids are not shown, so not grouped")
}
