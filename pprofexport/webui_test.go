package pprofexport_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/pproftool"
	"github.com/tensorlife/tensorlife/pprofexport"
)

// allocTwice makes masks from two lines of one function, so that the
// function has two locations a few bytes apart in the binary.
func allocTwice(p *program) {
	a, err := buildMasks(p.ctx("r1"), p.alloc, 3)
	p.live = append(p.live, a...)
	require.NoError(p.t, err)
	b, err := buildMasks(p.ctx("r2"), p.alloc, 1)
	p.live = append(p.live, b...)
	require.NoError(p.t, err)
}

// webSource serves path with go tool pprof -http and returns the text of
// its source view of the functions matching fn.
func webSource(t *testing.T, path, fn string) string {
	t.Helper()
	bin, err := pproftool.Path()
	if err != nil {
		t.Skipf("go tool pprof is not available: %v", err)
	}
	tmp := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// pprof prints the address it was given, not the one it got: pick a
	// free port first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd := exec.CommandContext(ctx, bin, "-http="+addr, "-no_browser", path)
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+tmp, "HOME="+tmp, "PPROF_BINARY_PATH="+tmp)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	serving := regexp.MustCompile(`Serving web UI on (http://\S+)`)
	var url string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := serving.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	require.NotEmpty(t, url, "pprof did not start its web UI")
	go func() { _, _ = io.Copy(io.Discard, stderr) }()

	// pprof says it serves before it listens: retry while it starts.
	client := &http.Client{Timeout: time.Minute}
	var resp *http.Response
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		resp, err = client.Get(url + "/ui/source?f=" + fn)
		if err == nil || time.Since(start) > time.Minute {
			break
		}
	}
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return regexp.MustCompile(`<[^>]*>`).ReplaceAllString(string(body), " ")
}

// pprof's web source view must agree with -list. With a mapping that named
// the binary with no address range, the web UI disassembled the binary
// around each address once per address and counted a function's samples
// twice (200% where -list said 100%), or, for a binary without a symbol
// table such as this test's, showed no line at all.
func TestGoToolPprofWebSourceAgreesWithList(t *testing.T) {
	prog := newProgram(t)
	allocTwice(prog)
	path := filepath.Join(t.TempDir(), "tensors.pb.gz")
	require.NoError(t, pprofexport.WriteFile(path, prog.snapshot()))
	const fn = "allocTwice"

	list, err := runPprof(t, "-list", fn, path)
	require.NoError(t, err)
	listTotal := regexp.MustCompile(`(?m)^\s+(\S+)\s+(\S+) \(flat, cum\)\s+(\S+) of Total$`).FindStringSubmatch(list)
	require.NotNil(t, listTotal, list)
	assert.Equal(t, "16kB", listTotal[2], "4 masks of 4 KiB")
	assert.Equal(t, "100%", listTotal[3])

	web := webSource(t, path, fn)
	webTotal := regexp.MustCompile(`Total:\s+(\S+)\s+(\S+) \(flat, cum\)\s+(\S+)`).FindStringSubmatch(web)
	require.NotNil(t, webTotal, "no total in the web source view")
	assert.Equal(t, listTotal[2], webTotal[2], "cum in the web source view")
	assert.Equal(t, strings.TrimSuffix(listTotal[3], "%"), strings.TrimSuffix(strings.TrimSuffix(webTotal[3], "%"), ".00"),
		"percentage in the web source view")
}
