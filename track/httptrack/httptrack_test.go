package httptrack_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/httptrack"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

//go:noinline
func record(t *testing.T, tr *track.Tracker, ctx context.Context, bytes int64) *track.Record {
	r := &track.Record{Bytes: bytes, Meta: track.InternMeta("kv-cache", "host", "", nil)}
	require.NoError(t, tr.Books().Record(ctx, r, 0))
	return r
}

// Each route's requests are a kind, labelled with the mux's pattern; each
// ends when its handler returns, so what it kept has outlived it then.
func TestRouteBeginsAndEndsRequests(t *testing.T) {
	tr, err := track.New(track.RequestKinds(httptrack.RouteKey))
	require.NoError(t, err)
	var kept []*track.Record
	var open track.OpenRequests
	mux := http.NewServeMux()
	httptrack.HandleFunc(mux, "POST /generate", func(w http.ResponseWriter, r *http.Request) {
		v, _ := track.LabelsFrom(r.Context()).Get(httptrack.RouteKey)
		assert.Equal(t, "POST /generate", v)
		scratch := record(t, tr, r.Context(), 1<<20)
		open = tr.OpenRequests(1)
		require.NoError(t, scratch.Release())
		kept = append(kept, record(t, tr, r.Context(), 4096)) // kept past the request: outlives it
	})
	httptrack.Handle(mux, "GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, (record(t, tr, r.Context(), 64)).Release())
	}))
	for range 3 {
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/generate", nil))
	}
	mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))

	assert.Equal(t, 1, open.Count, "one request open while the handler ran")
	require.Len(t, open.Largest, 1)
	assert.Equal(t, `{route="POST /generate"}`, open.Largest[0].Labels.String())
	assert.Zero(t, tr.OpenRequests(0).Count, "each ended when its handler returned")
	assert.Equal(t, int64(3*4096), tr.Totals().OutlivedBytes)

	kinds := tr.RequestCosts()
	require.Len(t, kinds, 2)
	assert.Equal(t, "route=GET /healthz", kinds[0].Kind)
	assert.Equal(t, int64(1), kinds[0].Requests)
	assert.Equal(t, "route=POST /generate", kinds[1].Kind)
	assert.Equal(t, int64(3), kinds[1].Requests)
	assert.Equal(t, int64(1<<20), kinds[1].PeakMax, "the scratch went before the kept was made")
	assert.Equal(t, int64(3*4096), kinds[1].OutlivedBytes)

	for _, r := range kept {
		require.NoError(t, r.Release())
	}
	tracktest.VerifyNone(t, tr)
}

// Outside a mux there is no pattern: the request is begun and ended, with
// no route label; a nil handler, or a nil func registered, is NotFound.
func TestRouteOutsideAMux(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	h := httptrack.Route(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Zero(t, track.LabelsFrom(r.Context()).Len())
		x := record(t, tr, r.Context(), 8)
		assert.Equal(t, 1, tr.OpenRequests(0).Count)
		require.NoError(t, x.Release())
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	assert.Zero(t, tr.OpenRequests(0).Count)

	rec := httptest.NewRecorder()
	httptrack.Route(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code)

	mux := http.NewServeMux()
	httptrack.HandleFunc(mux, "GET /nil", nil)
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/nil", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code, "a nil func registered is NotFound too")
}
