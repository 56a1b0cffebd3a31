package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newQuietServer builds a server that is not listening, for handler tests
// through httptest; the test's cleanup shuts it down and checks that
// nothing was left live.
func newQuietServer(t testing.TB, edit func(*config)) *server {
	t.Helper()
	cfg := defaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	s, err := newServer(cfg, slog.New(slog.DiscardHandler), io.Discard)
	require.NoError(t, err)
	t.Cleanup(func() {
		err := s.Shutdown(context.Background())
		if !cfg.leak && !errors.Is(err, errShutDown) {
			assert.NoError(t, err, "nothing is left live")
		}
	})
	return s
}

func TestGenerateParameters(t *testing.T) {
	s := newQuietServer(t, func(c *config) { c.maxPrompt, c.maxTokens, c.maxBatch = 256, 64, 4 })
	h := s.Handler()
	for _, tc := range []struct {
		name        string
		method      string
		target      string
		contentType string
		body        string
		status      int
		want        string // in the body
	}{
		{name: "defaults", method: "POST", target: "/generate", status: 200, want: `"prompt":64,"tokens":16,"batch":1`},
		{name: "query", method: "POST", target: "/generate?prompt=8&tokens=2&batch=3", status: 200, want: `"prompt":8,"tokens":2,"batch":3`},
		{name: "post query", method: "POST", target: "/generate?tokens=3", status: 200, want: `"tokens":3`},
		{name: "post json", method: "POST", target: "/generate?tokens=3", contentType: "application/json",
			body: `{"prompt":16,"tokens":4}`, status: 200, want: `"prompt":16,"tokens":4,"batch":1`},
		{name: "json charset", method: "POST", target: "/generate", contentType: "application/json; charset=utf-8",
			body: `{"batch":2}`, status: 200, want: `"batch":2`},
		{name: "not a number", method: "POST", target: "/generate?tokens=x", status: 400, want: `tokens="x" is not an integer`},
		{name: "zero tokens", method: "POST", target: "/generate?tokens=0", status: 400, want: "tokens=0, want 1..64"},
		{name: "prompt too long", method: "POST", target: "/generate?prompt=257", status: 400, want: "prompt=257, want 1..256"},
		{name: "negative batch", method: "POST", target: "/generate?batch=-1", status: 400, want: "batch=-1"},
		{name: "batch too large", method: "POST", target: "/generate?batch=5", status: 400, want: "batch=5, want 1..4"},
		{name: "unknown parameter", method: "POST", target: "/generate?temperature=1", status: 400, want: `unknown parameter "temperature"`},
		{name: "repeated parameter", method: "POST", target: "/generate?tokens=1&tokens=2", status: 400, want: "given 2 times"},
		{name: "unknown field", method: "POST", target: "/generate", contentType: "application/json",
			body: `{"temperature":1}`, status: 400, want: "unknown field"},
		{name: "bad json", method: "POST", target: "/generate", contentType: "application/json", body: `{"tokens":`, status: 400, want: "body:"},
		{name: "two values", method: "POST", target: "/generate", contentType: "application/json",
			body: `{"tokens":1} {"tokens":2}`, status: 400, want: "more than one JSON value"},
		{name: "form body", method: "POST", target: "/generate", contentType: "application/x-www-form-urlencoded",
			body: "tokens=2", status: 400, want: "must be application/json"},
		{name: "json out of bounds", method: "POST", target: "/generate", contentType: "application/json",
			body: `{"tokens":65}`, status: 400, want: "tokens=65"},
		{name: "method", method: "PUT", target: "/generate", status: 405, want: "Method Not Allowed"},
		// A GET must not change state, and running the decode loop does.
		{name: "get", method: "GET", target: "/generate?tokens=2", status: 405, want: "Method Not Allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			r := httptest.NewRequest(tc.method, tc.target, body)
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tc.status, w.Code, w.Body.String())
			assert.Contains(t, w.Body.String(), tc.want)
			if tc.status == http.StatusOK {
				var resp generateResponse
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp))
				assert.Equal(t, resp.Request, w.Header().Get("X-Request-Id"))
				assert.Equal(t, "fixed", resp.Mode)
			}
		})
	}
	assert.Zero(t, s.rebuilds(), "the fixed loop never rebuilds a mask")
}

// TestOutOfMemoryNamesTheLeak lets the leak run into a small budget: the
// request that does not fit gets 503 with a short text and its id, and the
// log, under that id, names the line that holds the memory. The client
// learns nothing of the server's insides.
func TestOutOfMemoryNamesTheLeak(t *testing.T) {
	logs := &syncBuffer{}
	cfg := defaultConfig()
	cfg.leak, cfg.capacity, cfg.budget, cfg.cache = true, 1<<20, 256<<10, 32<<10
	cfg.maxPrompt, cfg.maxTokens, cfg.maxBatch, cfg.maxInFlight = 64, 16, 1, 1
	s, err := newServer(cfg, slog.New(slog.NewTextHandler(logs, nil)), io.Discard)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	h := s.Handler()
	var w *httptest.ResponseRecorder
	for range 500 { // the budget runs out near request 50
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/generate?prompt=32&tokens=8", nil))
		if w.Code != http.StatusOK {
			break
		}
	}
	require.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	id := w.Header().Get("X-Request-Id")
	require.NotEmpty(t, id)
	body := w.Body.String()
	assert.Equal(t, "out of memory: the server is at its memory budget; retry later (request "+id+")\n", body)
	for _, internal := range []string{".go", "top live sites", "decodeLeaky", "budget limit", "/"} {
		assert.NotContains(t, strings.ReplaceAll(body, "(request "+id+")", ""), internal, "no internal text reaches the client")
	}

	var oomLine string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="out of memory"`) && strings.Contains(line, "request="+id) {
			oomLine = line
		}
	}
	require.NotEmpty(t, oomLine, "the log has the out-of-memory report under the request's id:\n%s", logs.String())
	assert.Contains(t, oomLine, "budget limit 256 KiB")
	assert.Contains(t, oomLine, "top live sites (tensor bytes, before the allocator rounds them):")
	assert.Contains(t, oomLine, leakFunc, "the log names the leak")
	assert.Positive(t, s.lanes[0].pool.Stats().OOMs)
}

func TestShutdownTwice(t *testing.T) {
	s := newQuietServer(t, nil)
	require.NoError(t, s.Shutdown(context.Background()))
	assert.ErrorIs(t, s.Shutdown(context.Background()), errShutDown)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/generate", nil))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "no request is served after shutdown")
	w = httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "the health check says so")
}

func TestSummaryEndpoint(t *testing.T) {
	s := newQuietServer(t, func(c *config) { c.leak, c.watchAfter = true, 0 })
	h := s.Handler()
	for range 12 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/generate?tokens=8", nil))
	}
	w := httptest.NewRecorder()
	s.DebugHandler().ServeHTTP(w, httptest.NewRequest("GET", "/debug/tensors/summary", nil))
	require.Equal(t, http.StatusOK, w.Code)
	summary := w.Body.String()
	assert.Contains(t, summary, `tensorlife memory summary: tracker "inferenceserver"`)
	assert.Contains(t, summary, "prompt-masks")
	_, suspects, ok := strings.Cut(summary, "Leak suspects")
	require.True(t, ok, summary)
	assert.Contains(t, suspects, "decodeLeaky (generate.go:")
}
