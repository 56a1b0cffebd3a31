//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package retainers

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
)

// dumpingEnv makes the test binary a search killed while it writes its
// heap dump: it writes one into the directory the variable names, says
// "writing", and waits with the file open until it is killed.
const dumpingEnv = "TENSORLIFE_RETAINERS_TEST_DUMP_UNTIL_KILLED"

func init() {
	dir := os.Getenv(dumpingEnv)
	if dir == "" {
		return
	}
	f, err := createDump(dir)
	if err != nil {
		os.Exit(2)
	}
	debug.WriteHeapDump(f.Fd())
	_, _ = os.Stdout.WriteString("writing\n")
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
	os.Exit(0)
}

// dumps lists the temporary files in dir.
func dumps(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// startDumping starts the test binary as a search in the middle of its
// dump into dir, and returns once the dump is on disk.
func startDumping(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), dumpingEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
		_ = stdin.Close()
	})
	buf := make([]byte, len("writing\n"))
	_, err = io.ReadFull(out, buf)
	require.NoError(t, err, "the child wrote its dump")
	return cmd
}

// TestAKilledSearchsDumpGoesWhenTheNextSearchStarts: a process killed by
// SIGKILL while it holds its heap dump leaves the file, as large as its
// heap; the next search removes it as it starts, however new it is, while
// a live search's dump in another process stays until that process dies.
func TestAKilledSearchsDumpGoesWhenTheNextSearchStarts(t *testing.T) {
	dir := t.TempDir()
	defer func(f func() string) { dumpDir = f }(dumpDir)
	dumpDir = func() string { return dir }

	killed := startDumping(t, dir)
	require.NoError(t, killed.Process.Signal(syscall.SIGKILL))
	_ = killed.Wait()
	left := dumps(t, dir)
	require.Len(t, left, 1, "the killed search leaves its dump")
	st, err := os.Stat(filepath.Join(dir, left[0]))
	require.NoError(t, err)
	assert.Positive(t, st.Size(), "a heap dump was written")

	live := startDumping(t, dir) // its own start sweeps the dead one's dump
	liveDumps := dumps(t, dir)
	require.Len(t, liveDumps, 1)
	assert.NotEqual(t, left, liveDumps)

	_, err = findAlone()
	require.NoError(t, err)
	assert.Equal(t, liveDumps, dumps(t, dir), "a live search's dump is kept; this search removed its own")

	require.NoError(t, live.Process.Signal(syscall.SIGKILL))
	_ = live.Wait()
	_, err = findAlone()
	require.NoError(t, err)
	assert.Empty(t, dumps(t, dir), "no dump is left once the next search has started")
}

// TestSearchLeavesOtherFilesAlone: the sweep touches only dumps, of
// atomicfile's naming, and never follows a link.
func TestSearchLeavesOtherFilesAlone(t *testing.T) {
	dir := t.TempDir()
	defer func(f func() string) { dumpDir = f }(dumpDir)
	dumpDir = func() string { return dir }
	kept := []string{"tensorlife-heapdump-4242-123", "heapdump", atomicfile.TempPrefix + "heapdump.1-000000.tmp"}
	for _, name := range kept {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600))
	}
	victim := filepath.Join(t.TempDir(), "precious")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o600))
	link := filepath.Join(dir, atomicfile.TempPrefix+"heapdump.link")
	require.NoError(t, os.Symlink(victim, link))
	_, err := findAlone()
	require.NoError(t, err)
	for _, name := range append(kept, filepath.Base(link)) {
		_, err := os.Lstat(filepath.Join(dir, name))
		assert.NoError(t, err, name)
	}
	assert.FileExists(t, victim)
}
