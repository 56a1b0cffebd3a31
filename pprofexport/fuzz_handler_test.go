package pprofexport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

// FuzzHandlerQuery sends the profile handler any query string a client
// could: it must answer with a status of its own (a profile, or a 4xx or 5xx
// naming what was wrong) and never panic. Delta windows end at once, so
// every delta a query asks for is computed and written.
func FuzzHandlerQuery(f *testing.F) {
	for _, q := range []string{"", "debug=1", "debug=7", "seconds=1", "seconds=1&seconds=1", "seconds=1&seconds=2",
		"min_age=10m", "min_age=-1s", "outlived=2", "outlived=1", "kind=mask&device=cuda:1", "gc=1", "%zz", "seconds=1e9",
		"leaked=1", "min_age=1h&kind=&debug=1&unknown=x"} {
		f.Add(q)
	}
	tr, err := track.New(track.OnLeak(func(track.LeakReport) {}))
	require.NoError(f, err)
	rec := &track.Record{Bytes: 4096, Meta: track.InternMeta("mask", "host", "bool", []int{64, 64})}
	require.NoError(f, tr.Books().Record(context.Background(), rec, 0))
	h, err := pprofexport.NewHandler(tr, pprofexport.WindowClock(pprofexport.Instant))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest(http.MethodGet, "/debug/pprof/tensors", nil)
		req.URL.RawQuery = query
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		assert.Contains(t, []int{http.StatusOK, http.StatusBadRequest, http.StatusTooManyRequests,
			http.StatusServiceUnavailable, http.StatusMethodNotAllowed}, w.Code, "query %q", query)
		if w.Code != http.StatusOK {
			assert.NotEmpty(t, w.Body.String(), "an error says what was wrong")
		}
	})
}
