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
// its source view of the functions matching fn. pprof runs in dir, or in
// the test's directory when dir is empty: pprof looks for the binary there.
func webSource(t *testing.T, dir, path, fn string) string {
	t.Helper()
	bin, err := pprofPath()
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
	cmd.Dir = dir
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
	//realtime:ok a probe of another process (pprof), which has no event to wait on: polled, bounded
	retry := time.NewTicker(20 * time.Millisecond)
	defer retry.Stop()
	for start := time.Now(); ; <-retry.C {
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

// pprof's web source view must agree with -list. Where pprof finds no
// binary, as here (this test's executable is not in pprof's directory),
// both take functions and lines from the profile alone.
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

	assertWebTotal(t, webSource(t, "", path, fn), listTotal)
}

// assertWebTotal checks the total of a web source view against -list's.
func assertWebTotal(t *testing.T, web string, listTotal []string) {
	t.Helper()
	webTotal := regexp.MustCompile(`Total:\s+(\S+)\s+(\S+) \(flat, cum\)\s+(\S+)`).FindStringSubmatch(web)
	require.NotNil(t, webTotal, "no total in the web source view")
	assert.Equal(t, listTotal[2], webTotal[2], "cum in the web source view")
	assert.Equal(t, strings.TrimSuffix(listTotal[3], "%"), strings.TrimSuffix(strings.TrimSuffix(webTotal[3], "%"), ".00"),
		"percentage in the web source view")
}

// Where pprof finds the binary (beside it, as after go build), its web
// source view disassembles it around each sample's address: the mapping's
// range must say where the text was loaded, or a position-independent
// executable shows nothing, and a range of 0-0 counts samples twice. The
// test builds a program both ways, has it write a profile, and serves the
// profile beside the binary. A binary without a symbol table (-ldflags=-s)
// shows no line in pprof's source view whatever the profile says, as for
// Go heap profiles: pprof finds no function to disassemble.
func TestGoToolPprofWebSourceWithTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program twice")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build with: %v", err)
	}
	for _, tt := range []struct{ name, buildmode string }{
		{"position-dependent", "exe"},
		{"position-independent", "pie"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "webprog")
			build := exec.Command(goBin, "build", "-buildmode="+tt.buildmode, "-o", bin, "./testdata/webprog")
			if out, err := build.CombinedOutput(); err != nil {
				t.Skipf("-buildmode=%s does not build here: %v\n%s", tt.buildmode, err, out)
			}
			path := filepath.Join(dir, "tensors.pb.gz")
			out, err := exec.Command(bin, path).CombinedOutput()
			require.NoError(t, err, "%s", out)

			list, err := runPprof(t, "-list", "allocTwice", path)
			require.NoError(t, err)
			listTotal := regexp.MustCompile(`(?m)^\s+(\S+)\s+(\S+) \(flat, cum\)\s+(\S+) of Total$`).FindStringSubmatch(list)
			require.NotNil(t, listTotal, list)
			assert.Equal(t, "16kB", listTotal[2], "4 masks of 4 KiB")

			web := webSource(t, dir, path, "allocTwice")
			assert.Contains(t, web, "File: webprog", "the legend names the binary")
			assertWebTotal(t, web, listTotal)
			assert.Regexp(t, `12kB\s+m, err := tensor\.New\(.*// three masks`, web, "the line that made three masks")
			assert.Regexp(t, `CALL .*tensor\.New`, web, "pprof disassembled the binary")
		})
	}
}

// The web UI heads every view with the profile's file and sample type; a
// mapping that names no file reads "unknown inuse_space".
func TestGoToolPprofWebHeaderNamesTheExecutable(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 1)
	path := filepath.Join(t.TempDir(), "tensors.pb.gz")
	require.NoError(t, pprofexport.WriteFile(path, prog.snapshot()))
	exe, err := os.Executable()
	require.NoError(t, err)

	web := webSource(t, "", path, "buildMasks")
	assert.NotContains(t, web, "unknown inuse_space")
	assert.Contains(t, web, filepath.Base(exe)+" inuse_space", "the page's title")
	assert.Contains(t, web, "File: "+filepath.Base(exe), "the legend")
}
