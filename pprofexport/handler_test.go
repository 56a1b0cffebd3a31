package pprofexport_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

const tensorsPath = "/debug/pprof/tensors"

// serve mounts h as a user would and serves it on 127.0.0.1.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(tensorsPath, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func newHandler(t *testing.T, tr *track.Tracker, opts ...pprofexport.Option) http.Handler {
	t.Helper()
	h, err := pprofexport.NewHandler(tr, opts...)
	require.NoError(t, err)
	return h
}

// get fetches url and returns the response and its body.
func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

func getProfile(t *testing.T, url string) *profile.Profile {
	t.Helper()
	resp, body := get(t, url)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Equal(t, "application/octet-stream", resp.Header.Get("Content-Type"))
	p, err := profile.ParseData(body)
	require.NoError(t, err)
	return p
}

func TestHandlerServesProfile(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	srv := serve(t, newHandler(t, prog.tracker))

	p := getProfile(t, srv.URL+tensorsPath)
	got := byLeaf(p)
	assert.Equal(t, [4]int64{3, 3 * maskBytes, 3, 3 * maskBytes}, got[fnMasks])
	assert.Equal(t, [4]int64{2, 2 * kvBytes, 2, 2 * kvBytes}, got[fnKV])
}

func TestHandlerQueryFilters(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	srv := serve(t, newHandler(t, prog.tracker))
	kvOnly := serve(t, newHandler(t, prog.tracker, pprofexport.WithFilter(track.Filter{Kind: "kv-cache"})))

	tests := []struct {
		name  string
		url   string
		masks int64 // live masks in the answer
		kv    int64
	}{
		{"no filter", srv.URL + tensorsPath, 3, 2},
		{"kind", srv.URL + tensorsPath + "?kind=kv-cache", 0, 2},
		{"min_age keeps nothing this young", srv.URL + tensorsPath + "?min_age=1h", 0, 0},
		{"min_age zero", srv.URL + tensorsPath + "?min_age=0s", 3, 2},
		{"leaked", srv.URL + tensorsPath + "?leaked=true", 0, 0},
		{"gc first", srv.URL + tensorsPath + "?gc=1", 3, 2},
		{"base filter", kvOnly.URL + tensorsPath, 0, 2},
		{"query overrides base filter", kvOnly.URL + tensorsPath + "?kind=", 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := byLeaf(getProfile(t, tt.url))
			assert.Equal(t, tt.masks, got[fnMasks][inuseObjects], "masks")
			assert.Equal(t, tt.kv, got[fnKV][inuseObjects], "kv")
		})
	}
}

func TestHandlerDebugText(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	srv := serve(t, newHandler(t, prog.tracker))

	resp, body := get(t, srv.URL+tensorsPath+"?debug=1&kind=tensor")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	text := string(body)
	assert.Contains(t, text, `# tensorlife: live tensors of tracker "pprofexport-test"`)
	assert.Contains(t, text, "# filter: kind=tensor")
	assert.Contains(t, text, fnMasks+" (")
	assert.Regexp(t, `(?m)^\s+\d+\s+3\s+12288\s+3\s+12288\s+0\s+\S+\s+`+fnMasks, text)
}

func TestHandlerBadRequests(t *testing.T) {
	prog := newProgram(t)
	srv := serve(t, newHandler(t, prog.tracker))

	tests := []struct {
		query string
		want  string
	}{
		{"debug=x", `"debug"`},
		{"debug=-1", `"debug"`},
		{"seconds=0", `"seconds"`},
		{"seconds=-3", `"seconds"`},
		{"seconds=1.5", `"seconds"`},
		{"seconds=9223372036854775807", `"seconds"`},
		{"seconds=2&debug=1", `cannot be combined`},
		{"min_age=soon", `"min_age"`},
		{"min_age=-1s", `"min_age"`},
		{"leaked=maybe", `"leaked"`},
		{"gc=maybe", `"gc"`},
		{"minage=5m", `unknown parameter "minage"`},
		{"kind=a&kind=b", `"kind" given 2 times`},
		{"kind=%zz", `malformed query`},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			resp, body := get(t, srv.URL+tensorsPath+"?"+tt.query)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
			assert.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
			assert.Equal(t, "1", resp.Header.Get("X-Go-Pprof"), "lets go tool pprof print the message")
			assert.Contains(t, string(body), tt.want)
		})
	}
	t.Run("method", func(t *testing.T) {
		resp, err := http.Post(srv.URL+tensorsPath, "text/plain", strings.NewReader(""))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
		assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
	})
}

func TestHandlerDeltaProfile(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	srv := serve(t, newHandler(t, prog.tracker))

	p := getProfile(t, srv.URL+tensorsPath+"?seconds=1")
	got := byLeaf(p)
	assert.Equal(t, [4]int64{0, 0, 3, 3 * maskBytes}, got[fnMasks],
		"nothing was allocated in the window; the masks are still live at its end")
	assert.GreaterOrEqual(t, p.DurationNanos, time.Second.Nanoseconds())
}

func TestHandlerDeltaRefusedPastWriteTimeout(t *testing.T) {
	prog := newProgram(t)
	mux := http.NewServeMux()
	mux.Handle(tensorsPath, newHandler(t, prog.tracker))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.WriteTimeout = 5 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)

	resp, body := get(t, srv.URL+tensorsPath+"?seconds=5")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), "WriteTimeout")
}

func TestHandlerDeltaEndsWithRequest(t *testing.T) {
	prog := newProgram(t)
	h := newHandler(t, prog.tracker)

	tests := []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		status int
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, http.StatusServiceUnavailable},
		// The context is also cancelled by the server (shutdown): a client
		// still there gets an error, never an empty 200.
		{"canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, tensorsPath+"?seconds=3600", nil)
			rec := httptest.NewRecorder()
			done := make(chan struct{})
			go func() {
				h.ServeHTTP(rec, req)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the handler kept waiting after its request ended")
			}
			assert.Equal(t, tt.status, rec.Code)
			assert.Contains(t, rec.Body.String(), "delta window interrupted")
		})
	}
}

func TestHandlerConstruction(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	tests := []struct {
		name string
		tr   *track.Tracker
		opts []pprofexport.Option
		want error
	}{
		{"nil tracker", nil, nil, pprofexport.ErrNilTracker},
		{"nil option", tr, []pprofexport.Option{nil}, pprofexport.ErrInvalidOption},
		{"negative min age", tr, []pprofexport.Option{pprofexport.WithFilter(track.Filter{MinAge: -time.Second})}, pprofexport.ErrInvalidOption},
		{"allocations listed", tr, []pprofexport.Option{pprofexport.WithFilter(track.Filter{Allocations: true})}, pprofexport.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := pprofexport.NewHandler(tt.tr, tt.opts...)
			assert.ErrorIs(t, err, tt.want)
			assert.Nil(t, h)
		})
	}
	t.Run("Handler(nil) serves the default tracker", func(t *testing.T) {
		rec := httptest.NewRecorder()
		pprofexport.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tensorsPath+"?debug=1", nil))
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Contains(t, rec.Body.String(), `tracker "default"`)
	})
}

func TestGoToolPprofFetchesHandler(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	srv := serve(t, pprofexport.Handler(prog.tracker))
	require.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"), srv.URL)

	out, err := runPprof(t, "-top", "-sample_index=inuse_objects", srv.URL+tensorsPath)
	require.NoError(t, err)
	assert.NotEmpty(t, lineMatching(out, topRow("3", fnMasks)), out)
	assert.NotEmpty(t, lineMatching(out, topRow("2", fnKV)), out)

	out, err = runPprof(t, "-top", "-sample_index=inuse_objects", srv.URL+tensorsPath+"?kind=mask&minage=1m")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), `unknown parameter "minage"`, "pprof shows the handler's message")
}
