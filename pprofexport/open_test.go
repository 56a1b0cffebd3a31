package pprofexport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

// ?open=1 serves the live tensors that open requests hold in flight: not
// those that outlived their request, nor those made under none.
func TestHandlerServesOpenRequests(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	meta := track.InternMeta("kv-cache", "host", "float16", nil)
	rec := func(ctx context.Context, bytes int64) *track.Record {
		r := &track.Record{Bytes: bytes, Meta: meta}
		require.NoError(t, tr.Books().Record(ctx, r, 0))
		return r
	}
	open, end := track.WithRequest(context.Background())
	inFlight := []*track.Record{rec(open, 1000), rec(open, 24)}
	done, endDone := track.WithRequest(context.Background())
	outlived := rec(done, 4096)
	endDone()
	weights := rec(context.Background(), 1<<20)

	h, err := pprofexport.NewHandler(tr)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	inuse := func(query string) (int64, *profile.Profile) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/debug/pprof/tensors" + query)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		p, err := profile.Parse(resp.Body)
		require.NoError(t, err)
		var sum int64
		for _, s := range p.Sample {
			sum += s.Value[3]
		}
		return sum, p
	}
	got, p := inuse("?open=1")
	assert.Equal(t, int64(1024), got, "what the open request holds, nothing else")
	assert.Contains(t, p.Comments, "tensorlife: filter open=1")
	all, _ := inuse("")
	assert.Equal(t, int64(1024+4096+1<<20), all)

	resp, err := http.Get(srv.URL + "/debug/pprof/tensors?open=1&outlived=1")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "in flight or outlived, not both")
	resp, err = http.Get(srv.URL + "/debug/pprof/tensors?open=2")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)

	end()
	got, _ = inuse("?open=1")
	assert.Zero(t, got, "an ended request holds nothing in flight")
	for _, r := range append(inFlight, outlived, weights) {
		require.NoError(t, r.Release())
	}
}
