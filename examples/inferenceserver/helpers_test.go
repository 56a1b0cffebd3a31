package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer that a logger and a test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is a server listening on a loopback port for one test.
type testServer struct {
	*server
	base   string // http://127.0.0.1:port, the public listener
	debug  string // the debug listener
	logs   *syncBuffer
	report *syncBuffer
	client *http.Client

	served   chan error
	stopOnce sync.Once
	stopErr  error
}

// startServer starts a server on 127.0.0.1 with the default config as
// changed by edit. The test's cleanup shuts it down if the test did not.
func startServer(t testing.TB, edit func(*config)) *testServer {
	t.Helper()
	return startServerLogging(t, edit, nil)
}

// startServerLogging is startServer with the log's handler wrapped by
// wrap, if not nil.
func startServerLogging(t testing.TB, edit func(*config), wrap func(slog.Handler) slog.Handler) *testServer {
	t.Helper()
	cfg := defaultConfig()
	cfg.addr = "127.0.0.1:0"
	cfg.debugAddr = "127.0.0.1:0"
	if edit != nil {
		edit(&cfg)
	}
	ts := &testServer{logs: &syncBuffer{}, report: &syncBuffer{}, served: make(chan error, 1)}
	var handler slog.Handler = slog.NewTextHandler(ts.logs, &slog.HandlerOptions{Level: slog.LevelDebug})
	if wrap != nil {
		handler = wrap(handler)
	}
	logger := slog.New(handler)
	s, err := newServer(cfg, logger, ts.report)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", cfg.addr)
	require.NoError(t, err)
	debugLn, err := net.Listen("tcp", cfg.debugAddr)
	require.NoError(t, err)
	ts.server = s
	ts.base = "http://" + ln.Addr().String()
	ts.debug = "http://" + debugLn.Addr().String()
	ts.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	go func() { ts.served <- s.Serve(ln, debugLn) }()
	t.Cleanup(func() {
		_ = ts.shutdown(t)
		if t.Failed() {
			t.Logf("server log:\n%s", ts.logs.String())
		}
	})
	return ts
}

// shutdown shuts the server down once, waits for Serve to return, and
// returns Shutdown's error.
func (ts *testServer) shutdown(t testing.TB) error {
	t.Helper()
	return ts.shutdownWithin(t, 20*time.Second)
}

// shutdownWithin is shutdown with a drain of d.
func (ts *testServer) shutdownWithin(t testing.TB, d time.Duration) error {
	t.Helper()
	ts.stopOnce.Do(func() {
		// A connection the client dialed and then did not need has sent no
		// request; Shutdown would wait five seconds before calling it idle.
		ts.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		ts.stopErr = ts.Shutdown(ctx)
		require.NoError(t, <-ts.served, "Serve returns nil after Shutdown")
	})
	return ts.stopErr
}

// get fetches url and returns the status and body.
func (ts *testServer) get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := ts.client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// outcome is one request of a load run.
type outcome struct {
	status int
	resp   generateResponse
	body   string
	err    error // a transport error
	// retryAfter is the answer's Retry-After header.
	retryAfter string
}

// load sends n /generate requests from workers goroutines, query(i)
// giving request i's query string, and returns every outcome by i. It
// returns once every request has been answered or has failed.
func (ts *testServer) load(n, workers int, query func(i int) string) []outcome {
	out := make([]outcome, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				out[i] = ts.generate(query(i))
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func (ts *testServer) generate(query string) outcome {
	resp, err := ts.client.Post(ts.base+"/generate?"+query, "", nil)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	o := outcome{status: resp.StatusCode, body: string(body), err: err, retryAfter: resp.Header.Get("Retry-After")}
	if err == nil && resp.StatusCode == http.StatusOK {
		o.err = json.Unmarshal(body, &o.resp)
	}
	return o
}

// metric sums the values of the series of name (exactly, before any
// label) whose labels contain every one of want, such as `kind="mask"`, in
// a Prometheus text exposition. It reports whether any series matched.
func metric(exposition, name string, want ...string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(exposition, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 || line[:end] != name {
			continue
		}
		labels := ""
		if line[end] == '{' {
			labels = line[end : strings.LastIndexByte(line, '}')+1]
		}
		matches := true
		for _, w := range want {
			matches = matches && strings.Contains(labels, w)
		}
		if !matches {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// pprofTop runs go tool pprof -top on url, as a person would, and returns
// the rows of its table: flat value first, function name last. pprof
// saves what it fetches under $PPROF_TMPDIR, the test's directory.
func pprofTop(t *testing.T, url string, args ...string) []string {
	t.Helper()
	bin, err := pprofPath()
	require.NoError(t, err, "go tool pprof must be available to this test")
	tmp := t.TempDir()
	cmd := exec.Command(bin, append(append([]string{"-top"}, args...), url)...)
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+tmp, "HOME="+tmp)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "pprof: %s", stderr.String())
	var rows []string
	inTable := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.Contains(line, "flat%") && strings.Contains(line, "cum%"):
			inTable = true
		case inTable && strings.TrimSpace(line) != "":
			rows = append(rows, strings.TrimSpace(line))
		}
	}
	require.NotEmpty(t, rows, "pprof -top printed no rows:\n%s", out)
	return rows
}

// flatRows returns the rows with a non-zero flat value: the functions that
// allocated what is live.
func flatRows(rows []string) []string {
	var out []string
	for _, r := range rows {
		if f := strings.Fields(r); len(f) > 0 && f[0] != "0" {
			out = append(out, r)
		}
	}
	return out
}

// pprofPath returns the path of the go tool pprof binary. `go tool -n
// pprof` prints it (building the tool into the cache if needed); it is
// asked once per test binary, so each run starts the binary directly
// instead of paying for `go tool` every time.
var pprofPath = sync.OnceValues(func() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(goBin, "tool", "-n", "pprof").Output()
	if err != nil {
		return "", fmt.Errorf("go tool -n pprof: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
})
