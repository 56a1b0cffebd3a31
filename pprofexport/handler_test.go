package pprofexport_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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

func newHandler(t *testing.T, tr *track.Tracker, opts ...pprofexport.HandlerOption) http.Handler {
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
	kvOnly := serve(t, newHandler(t, prog.tracker, pprofexport.Filter(track.Filter{Kind: "kv-cache"})))

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
		{"debug=x", `invalid value for "debug": "x", want 0 (profile) or 1 (text)`},
		{"debug=-1", `invalid value for "debug": "-1", want 0 (profile) or 1 (text)`},
		{"debug=7", `invalid value for "debug": "7", want 0 (profile) or 1 (text)`},
		{"debug=2", `invalid value for "debug": "2", want 0 (profile) or 1 (text)`},
		{"seconds=0", `"seconds"`},
		{"seconds=-3", `"seconds"`},
		{"seconds=1.5", `"seconds"`},
		{"seconds=301", `"seconds"=301 is longer than this endpoint's longest delta window, 300 seconds (MaxDeltaWindow)`},
		{"seconds=99999999", `300 seconds (MaxDeltaWindow)`},
		{"seconds=9223372036854775807", `300 seconds (MaxDeltaWindow)`},
		{"seconds=99999999999999999999", `"seconds"`},
		{"seconds=2&debug=1", `cannot be combined`},
		{"min_age=soon", `"min_age"`},
		{"min_age=-1s", `"min_age"`},
		{"leaked=maybe", `"leaked"`},
		{"gc=maybe", `"gc"`},
		{"kind=a&kind=b", `parameter "kind" given different values: "a" and "b"`},
		{"seconds=10&seconds=15", `parameter "seconds" given different values: "10" and "15"`},
		{"debug=1&debug=7", `parameter "debug" given different values`},
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

// instant is the handler option that runs every delta window at once.
var instant = pprofexport.WindowClock(pprofexport.Instant)

// isDelta reports whether p is a delta profile, by the comment every delta
// carries.
func isDelta(p *profile.Profile) bool {
	for _, c := range p.Comments {
		if strings.HasPrefix(c, "tensorlife: delta over ") {
			return true
		}
	}
	return false
}

// A delta spans its window: alloc values count the allocations made during
// it and nothing before, in-use values the change of the live set over it.
func TestHandlerDeltaProfile(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.churn("r1", 4)
	var asked time.Duration
	h := newHandler(t, prog.tracker, pprofexport.WindowClock(func(ctx context.Context, d time.Duration) error {
		asked = d
		prog.kv("r2", 2)    // live at the window's end
		prog.churn("r2", 1) // allocated and freed inside it
		return nil
	}))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tensorsPath+"?seconds=7", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	p, err := profile.ParseData(rec.Body.Bytes())
	require.NoError(t, err)

	assert.Equal(t, 7*time.Second, asked, "the window is the one asked for")
	got := byLeaf(p)
	assert.Equal(t, [4]int64{1, maskBytes, 0, 0}, got[fnMasks],
		"one mask allocated in the window; the three made before it were live all along")
	assert.Equal(t, [4]int64{2, 2 * kvBytes, 2, 2 * kvBytes}, got[fnKV], "the KV blocks made in the window")
	assert.True(t, isDelta(p), "%q", p.Comments)
	assert.Positive(t, p.DurationNanos, "the window's length between its two snapshots")
}

// A scraper running the README's two jobs adds the delta profiles it
// fetches and keeps the plain ones as they are: five consecutive windows of
// ?seconds=N added up are the change of the live set between the plain
// scrapes before and after them, and each plain scrape is the live set.
// go tool pprof reads a delta with negative values as it reads a diff.
func TestHandlerDeltaWindowsAddUp(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r0", 4)
	window := 0
	h := newHandler(t, prog.tracker, pprofexport.WindowClock(func(context.Context, time.Duration) error {
		window++
		prog.masks("leak", window) // kept: the leak
		prog.churn("step", 3)      // in flight
		if window == 5 {           // tensors from before the first window go
			for _, m := range prog.live[:2] {
				require.NoError(t, m.Free())
			}
			prog.live = prog.live[2:]
		}
		return nil
	}))
	srv := serve(t, h)
	liveOf := func(p *profile.Profile) [2]int64 {
		return [2]int64{totals(p)[inuseObjects], totals(p)[inuseSpace]}
	}

	before := getProfile(t, srv.URL+tensorsPath)
	assert.Equal(t, [2]int64{4, 4 * maskBytes}, liveOf(before), "a plain profile is the live set")
	var sum [4]int64
	var last []byte
	for range 5 {
		resp, body := get(t, srv.URL+tensorsPath+"?seconds=15")
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		p, err := profile.ParseData(body)
		require.NoError(t, err)
		require.NoError(t, p.CheckValid())
		for i, v := range totals(p) {
			sum[i] += v
		}
		last = body
	}
	after := getProfile(t, srv.URL+tensorsPath)
	live := prog.tracker.Totals()
	assert.Equal(t, [2]int64{live.LiveCount, live.LiveBytes}, liveOf(after), "a plain profile is the live set")
	assert.Equal(t, [2]int64{4 - 2 + 15, (4 - 2 + 15) * maskBytes}, liveOf(after))
	assert.Equal(t, [4]int64{15 + 15, 30 * maskBytes, 15 - 2, 13 * maskBytes}, sum,
		"the windows' allocations, and the change of the live set: 15 masks kept, 2 freed")
	assert.Equal(t, liveOf(after)[1]-liveOf(before)[1], sum[inuseSpace])

	path := filepath.Join(t.TempDir(), "delta.pb.gz")
	require.NoError(t, os.WriteFile(path, last, 0o644))
	out, err := runPprof(t, "-top", "-sample_index=inuse_space", path)
	require.NoError(t, err)
	assert.Contains(t, out, "Showing nodes accounting for 12kB,", "the last window kept five masks and freed two: %s", out)
	out, err = runPprof(t, "-top", "-sample_index=inuse_space", "-focus", `DeltaWindowsAddUp$`, path)
	require.NoError(t, err)
	assert.Contains(t, out, "Showing nodes accounting for -8kB,", "the two masks made before the windows, freed in the last: %s", out)
}

// Scrapers send their own parameters, and Parca and Grafana Alloy may send
// seconds twice: as net/http/pprof, the handler ignores what it does not
// read and takes a repeated parameter with one value as that value.
func TestHandlerToleratesScraperParameters(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	srv := serve(t, newHandler(t, prog.tracker, instant))

	tests := []struct {
		name  string
		query string
		masks int64
		kv    int64
	}{
		{"unknown parameters", "?minage=5m&job=inference&__name__=tensors", 3, 2},
		{"a repeated kind", "?kind=kv-cache&kind=kv-cache", 0, 2},
		{"a repeated empty debug", "?debug=0&debug=0", 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := byLeaf(getProfile(t, srv.URL+tensorsPath+tt.query))
			assert.Equal(t, tt.masks, got[fnMasks][inuseObjects], "masks")
			assert.Equal(t, tt.kv, got[fnKV][inuseObjects], "kv")
		})
	}
	t.Run("seconds twice", func(t *testing.T) {
		p := getProfile(t, srv.URL+tensorsPath+"?seconds=1&seconds=1&profile=tensors")
		assert.True(t, isDelta(p), "a delta profile: %q", p.Comments)
	})
}

// deadlineWriter is a middleware's ResponseWriter that unwraps, as
// http.NewResponseController asks, and records the write deadline set
// through it.
type deadlineWriter struct {
	http.ResponseWriter
	deadline time.Time
}

func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

func (d *deadlineWriter) SetWriteDeadline(t time.Time) error {
	d.deadline = t
	return http.NewResponseController(d.ResponseWriter).SetWriteDeadline(t)
}

// A delta window longer than the server's WriteTimeout is served: the
// handler moves the write deadline past the window, as net/http/pprof does.
func TestHandlerDeltaExtendsWriteDeadline(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 2)
	h := newHandler(t, prog.tracker, instant)
	const writeTimeout, window = 200 * time.Millisecond, 5 * time.Second
	// past is how far past the request's start the deadline was set.
	past := make(chan time.Duration, 1)
	mux := http.NewServeMux()
	mux.Handle(tensorsPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		before := time.Now()
		dw := &deadlineWriter{ResponseWriter: w}
		h.ServeHTTP(dw, r)
		past <- dw.deadline.Sub(before)
	}))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.WriteTimeout = writeTimeout
	srv.Start()
	t.Cleanup(srv.Close)

	p := getProfile(t, srv.URL+tensorsPath+"?seconds=5")
	assert.True(t, isDelta(p), "%q", p.Comments)
	assert.Empty(t, p.Sample, "nothing changed in the window")
	assert.GreaterOrEqual(t, <-past, writeTimeout+window, "the deadline is the WriteTimeout past the window's end")
}

// opaqueWriter hides the connection's ResponseWriter, as a middleware that
// does not implement Unwrap does, so the deadline cannot be moved.
type opaqueWriter struct{ w http.ResponseWriter }

func (o opaqueWriter) Header() http.Header         { return o.w.Header() }
func (o opaqueWriter) Write(b []byte) (int, error) { return o.w.Write(b) }
func (o opaqueWriter) WriteHeader(status int)      { o.w.WriteHeader(status) }

func TestHandlerDeltaRefusedWhereTheDeadlineCannotMove(t *testing.T) {
	prog := newProgram(t)
	h := newHandler(t, prog.tracker)
	mux := http.NewServeMux()
	mux.Handle(tensorsPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(opaqueWriter{w}, r)
	}))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.WriteTimeout = time.Second
	srv.Start()
	t.Cleanup(srv.Close)

	resp, body := get(t, srv.URL+tensorsPath+"?seconds=1")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), `"seconds"=1 reaches the server's WriteTimeout of 1s`, "the text states the limit")
}

func TestHandlerMaxDeltaWindow(t *testing.T) {
	prog := newProgram(t)
	srv := serve(t, newHandler(t, prog.tracker, pprofexport.MaxDeltaWindow(2*time.Second)))
	resp, body := get(t, srv.URL+tensorsPath+"?seconds=3")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), "longest delta window, 2 seconds (MaxDeltaWindow)")

	off := serve(t, newHandler(t, prog.tracker, pprofexport.MaxConcurrentDeltas(0)))
	resp, body = get(t, off.URL+tensorsPath+"?seconds=1")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), "turned off")
	getProfile(t, off.URL+tensorsPath) // the live profile is still served
}

// MaxConcurrentProfiles(0) serves delta profiles only.
func TestHandlerProfilesOff(t *testing.T) {
	prog := newProgram(t)
	srv := serve(t, newHandler(t, prog.tracker, pprofexport.MaxConcurrentProfiles(0), pprofexport.WindowClock(pprofexport.Instant)))
	for _, query := range []string{"", "?debug=1"} {
		resp, body := get(t, srv.URL+tensorsPath+query)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Contains(t, string(body), "turned off on this endpoint (MaxConcurrentProfiles(0))")
	}
	getProfile(t, srv.URL+tensorsPath+"?seconds=1") // deltas are still served
}

// A handler serves no request label unless it is listed: whoever reaches
// the endpoint reads the profile.
func TestHandlerLabelKeys(t *testing.T) {
	prog := newProgram(t)
	ctx := track.WithLabels(context.Background(), "request", "r-secret", "model", "m1", "bytes", "x")
	ms, err := buildMasks(ctx, prog.alloc, 2)
	prog.live = append(prog.live, ms...)
	require.NoError(t, err)

	tests := []struct {
		name string
		opts []pprofexport.HandlerOption
		want map[string][]string
	}{
		{"none by default", nil, map[string][]string{}},
		{"listed keys", []pprofexport.HandlerOption{pprofexport.LabelKeys("model", "bytes")},
			map[string][]string{"model": {"m1"}, "label_bytes": {"x"}}},
		{"no key", []pprofexport.HandlerOption{pprofexport.LabelKeys()}, map[string][]string{}},
	}
	// A delta's in-use values are what changed: two more masks in its window.
	more := pprofexport.WindowClock(func(context.Context, time.Duration) error {
		ms, err := buildMasks(ctx, prog.alloc, 2)
		prog.live = append(prog.live, ms...)
		return err
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, newHandler(t, prog.tracker, append(tt.opts, more)...))
			for _, url := range []string{srv.URL + tensorsPath, srv.URL + tensorsPath + "?seconds=1"} {
				p := getProfile(t, url)
				var live []*profile.Sample
				for _, s := range p.Sample {
					if s.Value[inuseObjects] != 0 {
						live = append(live, s)
					}
				}
				// The masks made in windows have stacks of their own.
				require.NotEmpty(t, live, url)
				for _, s := range live {
					got := map[string][]string{}
					for k, v := range s.Label {
						switch k {
						case "dtype", "device", "kind", "shape":
						default:
							got[k] = v
						}
					}
					assert.Equal(t, tt.want, got, url)
					assert.Equal(t, []string{"bool"}, s.Label["dtype"], "the tensors' own attributes are always there")
					assert.Equal(t, []int64{maskBytes}, s.NumLabel["bytes"])
				}
			}
		})
	}
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
			return context.WithTimeout(context.Background(), 5*time.Millisecond)
		}, http.StatusServiceUnavailable},
		// The context is also cancelled by the server (shutdown): a client
		// still there gets an error, never an empty 200.
		{"canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(5*time.Millisecond, cancel)
			return ctx, cancel
		}, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, tensorsPath+"?seconds=300", nil)
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
		opts []pprofexport.HandlerOption
		want error
	}{
		{"nil tracker", nil, nil, track.ErrNilTracker},
		{"nil option", tr, []pprofexport.HandlerOption{nil}, pprofexport.ErrInvalidOption},
		{"negative min age", tr, []pprofexport.HandlerOption{pprofexport.Filter(track.Filter{MinAge: -time.Second})}, pprofexport.ErrInvalidOption},
		{"allocations listed", tr, []pprofexport.HandlerOption{pprofexport.Filter(track.Filter{Allocations: true})}, pprofexport.ErrInvalidOption},
		{"no delta window", tr, []pprofexport.HandlerOption{pprofexport.MaxDeltaWindow(0)}, pprofexport.ErrInvalidOption},
		{"a window in part seconds", tr, []pprofexport.HandlerOption{pprofexport.MaxDeltaWindow(1500 * time.Millisecond)}, pprofexport.ErrInvalidOption},
		{"a window over an hour", tr, []pprofexport.HandlerOption{pprofexport.MaxDeltaWindow(time.Hour + time.Second)}, pprofexport.ErrInvalidOption},
		{"negative concurrent deltas", tr, []pprofexport.HandlerOption{pprofexport.MaxConcurrentDeltas(-1)}, pprofexport.ErrInvalidOption},
		{"too many concurrent deltas", tr, []pprofexport.HandlerOption{pprofexport.MaxConcurrentDeltas(257)}, pprofexport.ErrInvalidOption},
		{"negative concurrent profiles", tr, []pprofexport.HandlerOption{pprofexport.MaxConcurrentProfiles(-1)}, pprofexport.ErrInvalidOption},
		{"too many concurrent profiles", tr, []pprofexport.HandlerOption{pprofexport.MaxConcurrentProfiles(257)}, pprofexport.ErrInvalidOption},
		{"empty label key", tr, []pprofexport.HandlerOption{pprofexport.LabelKeys("model", "")}, pprofexport.ErrInvalidOption},
		{"too many label keys", tr, []pprofexport.HandlerOption{pprofexport.LabelKeys(make([]string, 65)...)}, pprofexport.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := pprofexport.NewHandler(tt.tr, tt.opts...)
			assert.ErrorIs(t, err, tt.want)
			assert.Nil(t, h)
		})
	}
}

func TestGoToolPprofFetchesHandler(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	srv := serve(t, newHandler(t, prog.tracker))
	require.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"), srv.URL)

	out, err := runPprof(t, "-top", "-sample_index=inuse_objects", srv.URL+tensorsPath)
	require.NoError(t, err)
	assert.NotEmpty(t, lineMatching(out, topRow("3", fnMasks)), out)
	assert.NotEmpty(t, lineMatching(out, topRow("2", fnKV)), out)

	out, err = runPprof(t, "-top", "-sample_index=inuse_objects", srv.URL+tensorsPath+"?kind=mask&debug=7")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), `want 0 (profile) or 1 (text)`, "pprof shows the handler's message")
}

// TestHandlerProfileIsWrittenSnapshot guards the handler's profile, whose
// groups are read apart from their snapshot (track.Books.GroupsOf) and
// written as they are read: it is, byte for byte once uncompressed, what
// Write makes of the snapshot SnapshotOf takes with the handler's filter,
// for the default profile (read from counters), by label keys, and
// filtered.
func TestHandlerProfileIsWrittenSnapshot(t *testing.T) {
	at := time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)
	prog := newProgram(t, track.Clock(func() time.Time { return at }))
	prog.masks("r1", 3)
	prog.kv("r2", 2)
	for i := range 40 {
		ctx := track.WithLabels(context.Background(), "request", fmt.Sprintf("r%02d", i), "model", "m")
		ms, err := buildMasks(ctx, prog.alloc, 1+i%3)
		prog.live = append(prog.live, ms...)
		require.NoError(t, err)
	}
	uncompressed := func(t *testing.T, body []byte) []byte {
		t.Helper()
		zr, err := gzip.NewReader(bytes.NewReader(body))
		require.NoError(t, err)
		out, err := io.ReadAll(zr)
		require.NoError(t, err)
		return out
	}
	for _, tt := range []struct {
		name   string
		keys   []string // nil: the handler's default
		query  string
		filter track.Filter
	}{
		{name: "default", filter: track.Filter{LabelKeys: []string{}}},
		{name: "by request", keys: []string{"request"}, filter: track.Filter{LabelKeys: []string{"request"}}},
		{name: "by request and model", keys: []string{"request", "model"},
			filter: track.Filter{LabelKeys: []string{"request", "model"}}},
		{name: "by model, kv only", keys: []string{"model"}, query: "?kind=kv-cache",
			filter: track.Filter{Kind: "kv-cache", LabelKeys: []string{"model"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var opts []pprofexport.HandlerOption
			var popts []pprofexport.ProfileOption
			if tt.keys != nil {
				opts = append(opts, pprofexport.LabelKeys(tt.keys...))
				popts = append(popts, pprofexport.LabelKeys(tt.keys...))
			}
			srv := serve(t, newHandler(t, prog.tracker, opts...))
			resp, body := get(t, srv.URL+tensorsPath+tt.query)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			snap, err := prog.tracker.SnapshotOf(tt.filter)
			require.NoError(t, err)
			var want bytes.Buffer
			require.NoError(t, pprofexport.Write(&want, snap, popts...))
			assert.Equal(t, uncompressed(t, want.Bytes()), uncompressed(t, body))
		})
	}
}
