package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A debug client may force a garbage collection (gc=1, on the heap or the
// tensors profile) once every gcEvery; another is refused with 429 and
// Retry-After, while requests that do not ask for one are served.
func TestDebugListenerLimitsForcedCollections(t *testing.T) {
	s := newQuietServer(t, nil)
	now := time.Unix(1000, 0)
	s.gc.now = func() time.Time { return now }
	h := s.DebugHandler()
	get := func(target string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		return w
	}

	require.Equal(t, http.StatusOK, get("/debug/pprof/tensors?gc=1").Code)
	for _, target := range []string{"/debug/pprof/tensors?gc=1", "/debug/pprof/heap?gc=1", "/debug/pprof/tensors?gc=true", "/debug/pprof/heap?gc=2"} {
		w := get(target)
		assert.Equal(t, http.StatusTooManyRequests, w.Code, target)
		assert.Equal(t, "10", w.Header().Get("Retry-After"), target)
		assert.Contains(t, w.Body.String(), "at most once every 10s", target)
	}
	for _, target := range []string{"/debug/pprof/tensors", "/debug/pprof/tensors?gc=0", "/debug/pprof/heap?gc=false", "/debug/pprof/heap"} {
		assert.Equal(t, http.StatusOK, get(target).Code, "%s forces no collection", target)
	}

	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/debug/pprof/heap", strings.NewReader("gc=1"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusTooManyRequests, w.Code, "net/http/pprof reads gc from a form body too")

	now = now.Add(4 * time.Second)
	assert.Equal(t, "6", get("/debug/pprof/heap?gc=1").Header().Get("Retry-After"))
	now = now.Add(6 * time.Second)
	assert.Equal(t, http.StatusOK, get("/debug/pprof/heap?gc=1").Code, "one collection per interval")
	assert.Equal(t, http.StatusTooManyRequests, get("/debug/pprof/tensors?gc=1").Code)
}
