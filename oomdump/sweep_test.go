//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package oomdump_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/oomdump"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/track"
)

// dumpingEnv makes the test binary a service whose dump is cut short (see
// dumpUntilKilled): it dumps into the directory the variable names.
const dumpingEnv = "OOMDUMP_TEST_DUMP_UNTIL_KILLED"

func TestMain(m *testing.M) {
	if dir := os.Getenv(dumpingEnv); dir != "" {
		dumpUntilKilled(dir)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stuckPool is a pool-like part whose figures never come: the summary
// waits on it in the middle of its file, as a dump waits on a slow part
// when the process is killed. It says "writing" on standard output when
// the summary asks, then waits for standard input to close.
type stuckPool struct{ _ int }

func (*stuckPool) PartInfo() track.PartInfo { return track.PartInfo{Kind: "pool", Left: -1} }

func (*stuckPool) Stats() pool.Stats {
	_, _ = os.Stdout.WriteString("writing\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return pool.Stats{}
}

// dumpUntilKilled writes a dump into dir that stops in the middle of its
// summary, and waits there.
func dumpUntilKilled(dir string) {
	tr, err := track.New(track.Name("svc"))
	if err != nil {
		panic(err)
	}
	d, err := oomdump.New(tr, dir)
	if err != nil {
		panic(err)
	}
	stuck := &stuckPool{}
	track.Attach(tr, stuck)
	d.OutOfMemory(nil)
	_ = d.Wait()
	runtime.KeepAlive(stuck)
}

// dumper is another process in the middle of a dump.
type dumper struct{ cmd *exec.Cmd }

// startDumper starts the test binary as a service whose dump into dir is
// cut short, and returns once the dump's summary is being written.
func startDumper(t *testing.T, dir string) *dumper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), dumpingEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	d := &dumper{cmd: cmd}
	t.Cleanup(func() { d.kill(); _ = stdin.Close() })
	buf := make([]byte, len("writing\n"))
	_, err = io.ReadFull(out, buf)
	require.NoError(t, err, "the dump started its summary")
	return d
}

// kill kills the process with SIGKILL and waits for it to be gone.
func (d *dumper) kill() {
	if d.cmd.ProcessState == nil {
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		_ = d.cmd.Wait()
	}
}

// TestAKilledDumpsFileGoesWhenTheNextDumperStarts: a service killed in the
// middle of its dump leaves the temporary file of the summary it was
// writing; the next dumper made on the directory removes it, at once,
// while the file of a dump in flight in another process stays until that
// process dies too.
func TestAKilledDumpsFileGoesWhenTheNextDumperStarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oom")
	killed := startDumper(t, dir)
	killed.kill()
	left := temps(t, dir)
	require.Len(t, left, 1, "the killed dump leaves its summary's temporary file (the profile was complete)")
	assert.Contains(t, left[0], "svc-oom-")

	live := startDumper(t, dir) // its own New sweeps the dead one's file first
	require.Len(t, temps(t, dir), 1, "the live dump's file alone")
	liveFile := temps(t, dir)[0]
	assert.NotEqual(t, left[0], liveFile)

	tr, err := track.New(track.Name("next"))
	require.NoError(t, err)
	_, err = oomdump.New(tr, dir)
	require.NoError(t, err)
	assert.Equal(t, []string{liveFile}, temps(t, dir), "a live writer's file is kept")

	live.kill()
	_, err = oomdump.New(tr, dir)
	require.NoError(t, err)
	assert.Empty(t, temps(t, dir), "the next dumper to start removes it")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "the two complete profiles are kept")
}

// temps lists the temporary files in dir.
func temps(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestNewNeverWaitsOnALockedDirectory: a directory another program holds
// a flock on, shared or exclusive, makes neither New nor a dump wait.
func TestNewNeverWaitsOnALockedDirectory(t *testing.T) {
	for _, how := range []int{syscall.LOCK_SH, syscall.LOCK_EX} {
		dir := t.TempDir()
		d, err := os.Open(dir)
		require.NoError(t, err)
		require.NoError(t, syscall.Flock(int(d.Fd()), how))
		tr, err := track.New(track.Name("locked"))
		require.NoError(t, err)
		dumper, err := oomdump.New(tr, dir)
		require.NoError(t, err)
		dumper.OutOfMemory(nil)
		require.NoError(t, dumper.Wait())
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.NotEmpty(t, entries, "the dump was written")
		assert.Empty(t, temps(t, dir))
		require.NoError(t, d.Close())
	}
}
