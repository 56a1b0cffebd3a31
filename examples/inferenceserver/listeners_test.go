package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track/tracktest"
)

// The public listener serves /generate and the health check only; the
// profiles, net/http/pprof, the summary and the metrics are on the debug
// listener.
func TestDebugEndpointsAreOffThePublicListener(t *testing.T) {
	ts := startServer(t, nil)
	require.Equal(t, http.StatusOK, ts.generate("tokens=2").status)

	status, body := ts.get(t, ts.base+"/healthz")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok\n", body)

	for _, path := range []string{"/debug/pprof/tensors", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1",
		"/debug/tensors/summary", "/metrics"} {
		status, _ := ts.get(t, ts.base+path)
		assert.Equal(t, http.StatusNotFound, status, "public %s", path)
	}

	debug := []struct {
		path string
		want string
	}{
		{"/debug/pprof/", "goroutine"},
		{"/debug/pprof/heap?debug=1", "heap profile"},
		{"/debug/pprof/cmdline", ""},
		{"/debug/tensors/summary", "tensorlife memory summary"},
		{"/metrics", "tensorlife_tensor_live"},
	}
	for _, d := range debug {
		status, body := ts.get(t, ts.debug+d.path)
		assert.Equal(t, http.StatusOK, status, "debug %s", d.path)
		assert.Contains(t, body, d.want, "debug %s", d.path)
	}
	status, body = ts.get(t, ts.debug+"/debug/pprof/tensors")
	require.Equal(t, http.StatusOK, status)
	p, err := profile.ParseData([]byte(body))
	require.NoError(t, err)
	for _, s := range p.Sample {
		assert.NotContains(t, s.Label, "request", "the endpoint serves no request ids")
	}
}

// A pending delta scrape does not hold the shutdown: its request is
// cancelled at once, it answers 503, and Shutdown's error says only
// whether tensors were left live.
func TestShutdownEndsAPendingDeltaScrape(t *testing.T) {
	ts := startServer(t, nil)
	require.Equal(t, http.StatusOK, ts.generate("tokens=2").status)

	type answer struct {
		status int
		body   string
		err    error
	}
	scraped := make(chan answer, 1)
	go func() {
		resp, err := ts.client.Get(ts.debug + "/debug/pprof/tensors?seconds=60")
		if err != nil {
			scraped <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		scraped <- answer{resp.StatusCode, string(body), err}
	}()
	for ts.debugActive.Load() == 0 {
		time.Sleep(time.Millisecond)
	}

	// The drain would outlast the test's patience if the scrape held it.
	require.NoError(t, ts.shutdownWithin(t, 10*time.Minute), "no tensor was left live")
	a := <-scraped
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusServiceUnavailable, a.status)
	assert.Contains(t, a.body, "delta window interrupted")
	assert.Contains(t, ts.logs.String(), `msg="ending debug requests" running=1`)
	tracktest.VerifyNone(t, ts.tr)
}

// Requests beyond -max-inflight are refused at once with 503 and
// Retry-After, and their places come back when requests end.
func TestAdmissionIsBounded(t *testing.T) {
	s := newQuietServer(t, func(c *config) { c.maxInFlight = 3 })
	h := s.Handler()
	post := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/generate?tokens=2", nil))
		return w
	}
	for range cap(s.admit) { // three requests in the middle of their work
		s.admit <- struct{}{}
	}
	w := post()
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Equal(t, "busy: 3 requests running, the most this server runs at once; retry later (request "+
		w.Header().Get("X-Request-Id")+")\n", w.Body.String())

	<-s.admit // one ends
	assert.Equal(t, http.StatusOK, post().Code)
	assert.Equal(t, http.StatusOK, post().Code, "the request gave its place back")
	<-s.admit
	<-s.admit
	assert.Empty(t, s.admit)
}

// With the bounds validated against the budget, -max-inflight requests of
// the largest size run at once without running it out.
func TestLargestRequestsFitTheBudgetTogether(t *testing.T) {
	ts := startServer(t, func(c *config) {
		c.capacity, c.budget, c.cache = 16<<20, 8<<20, 1<<20
		c.maxPrompt, c.maxTokens, c.maxBatch, c.maxInFlight = 256, 256, 4, 10
	})
	require.NoError(t, ts.cfg.validate())
	outcomes := ts.load(60, ts.cfg.maxInFlight, func(i int) string {
		return "prompt=" + []string{"256", "255", "254"}[i%3] + "&tokens=256&batch=4"
	})
	for i, o := range outcomes {
		require.NoError(t, o.err)
		assert.Equal(t, http.StatusOK, o.status, "request %d: %s", i, strings.TrimSpace(o.body))
	}
	assert.Zero(t, ts.lanes[0].pool.Stats().OOMs)
}
