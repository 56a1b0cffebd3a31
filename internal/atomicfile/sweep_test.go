//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package atomicfile_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
)

// writer is another process in the middle of an atomicfile.Write.
type writer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startWriter starts the test binary as a writer of path (see writerEnv)
// and returns once it is in the middle of its write, its temporary file
// written in part and locked.
func startWriter(t *testing.T, path string) *writer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w := &writer{cmd: cmd, stdin: stdin}
	t.Cleanup(w.kill)
	buf := make([]byte, len("writing\n"))
	_, err = io.ReadFull(out, buf)
	require.NoError(t, err, "the writer started writing")
	return w
}

// kill kills the writer with SIGKILL, so nothing of its own runs after,
// and waits for it to be gone. Killing it twice is harmless.
func (w *writer) kill() {
	if w.cmd.ProcessState != nil {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	_ = w.cmd.Wait()
	_ = w.stdin.Close()
}

// TestKilledWritersFileGoesAtTheNextSweep: a writer killed in the middle of
// its write leaves its temporary file, whole megabytes of it; the next
// write in the directory removes it at once, however new it is, and
// leaves a live writer's file (another process's, as new and as named)
// alone.
func TestKilledWritersFileGoesAtTheNextSweep(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tensors.pb.gz")
	killed := startWriter(t, path)
	killed.kill()
	left := temporaries(t, dir)
	require.Len(t, left, 1, "a killed writer leaves its temporary file")
	assert.True(t, strings.HasPrefix(left[0], atomicfile.TempPrefix+"tensors.pb.gz."), left[0])
	st, err := os.Stat(filepath.Join(dir, left[0]))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, st.Size(), int64(1<<20), "the writer was cut off in the middle")
	assert.NoFileExists(t, path)

	live := startWriter(t, filepath.Join(dir, "trace.json"))
	liveTemp := without(temporaries(t, dir), left[0])
	require.Len(t, liveTemp, 1)

	require.NoError(t, atomicfile.Write(path, writeString("profile")))
	assert.Equal(t, liveTemp, temporaries(t, dir), "the dead writer's file is gone, the live one's kept")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "profile", string(got))

	// The live writer's file goes once that writer dies too, and not by
	// age: it is as old as it was a moment ago.
	live.kill()
	assert.Equal(t, 1, atomicfile.Sweep(dir))
	assert.Empty(t, temporaries(t, dir))
}

// TestSweepKeepsALiveWritersFileInThisProcess: the lock is the open
// file's, not the process's, so a sweep in the writing process keeps the
// file of a write in flight on another goroutine, and that write finishes.
func TestSweepKeepsALiveWritersFileInThisProcess(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "summary.txt")
	writing, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- atomicfile.Write(path, func(w io.Writer) error {
			if _, err := io.WriteString(w, strings.Repeat("y", 300<<10)); err != nil {
				return err
			}
			close(writing)
			<-finish
			return nil
		})
	}()
	<-writing
	require.Len(t, temporaries(t, dir), 1)
	assert.Zero(t, atomicfile.Sweep(dir))
	require.NoError(t, atomicfile.Write(filepath.Join(dir, "other.txt"), writeString("other")))
	require.Len(t, temporaries(t, dir), 1, "a write in flight keeps its file through others' sweeps")
	close(finish)
	require.NoError(t, <-done)
	assert.Empty(t, temporaries(t, dir))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Len(t, got, 300<<10)
}

// TestSweepKeepsAFileLockedElsewhere: any open file that holds the lock
// keeps the temporary file (a writer's descriptor handed to a child, say).
func TestSweepKeepsAFileLockedElsewhere(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, atomicfile.TempName("tensors.pb.gz", 99))
	require.NoError(t, os.WriteFile(p, []byte("partial"), 0o600))
	f, err := os.Open(p)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	assert.Zero(t, atomicfile.Sweep(dir))
	assert.FileExists(t, p)
	require.NoError(t, f.Close())
	assert.Equal(t, 1, atomicfile.Sweep(dir))
	assert.NoFileExists(t, p)
}

// TestSweepLeavesOtherWritersFiles guards other programs' files from the
// sweep: a file named with the same prefix and suffix but not by this
// package (no check, a wrong check, a number out of form), unlocked and
// old, is kept; this package's own unlocked file is removed.
func TestSweepLeavesOtherWritersFiles(t *testing.T) {
	dir := t.TempDir()
	ours := atomicfile.TempName("report.txt", 1<<40)
	flipped := []byte(ours) // ours with the last digit of its check changed
	last := len(flipped) - len(".tmp") - 1
	flipped[last] = map[bool]byte{true: '1', false: '0'}[flipped[last] == '0']
	others := []string{
		atomicfile.TempPrefix + "report.txt.abc.tmp",        // an older naming, or another writer's
		atomicfile.TempPrefix + "report.txt.abc-000000.tmp", // a check that does not match
		string(flipped),
		strings.Replace(ours, "report.txt", "other.txt", 1), // the check is of the base too
		atomicfile.TempPrefix + ".tmp",
		atomicfile.TempPrefix + "x.-abcdef.tmp",
		".tensors.pb.gz.123.tmp",        // someone else's naming
		atomicfile.TempPrefix + "notes", // another suffix
	}
	old := time.Now().Add(-48 * time.Hour)
	for _, name := range append([]string{ours}, others...) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o600))
		require.NoError(t, os.Chtimes(p, old, old))
	}
	ourDir := filepath.Join(dir, atomicfile.TempName("dir", 7))
	require.NoError(t, os.Mkdir(ourDir, 0o755))
	ourLink := filepath.Join(dir, atomicfile.TempName("link", 8))
	require.NoError(t, os.Symlink(filepath.Join(dir, ours), ourLink))

	require.NoError(t, atomicfile.Write(filepath.Join(dir, "out.txt"), writeString("new")))
	assert.NoFileExists(t, filepath.Join(dir, ours), "this package's abandoned file is removed")
	for _, name := range others {
		assert.FileExists(t, filepath.Join(dir, name), "another writer's file is kept")
	}
	assert.DirExists(t, ourDir, "only regular files are removed")
	_, err := os.Lstat(ourLink)
	assert.NoError(t, err, "a link is not followed nor removed")
	assert.Zero(t, atomicfile.Sweep(filepath.Join(dir, "missing")), "a directory that cannot be read is swept of nothing")
}

func without(names []string, drop string) []string {
	var out []string
	for _, n := range names {
		if n != drop {
			out = append(out, n)
		}
	}
	return out
}

func temporaries(t *testing.T, dir string) []string {
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

// TestASweepNeverWaits: another program's flock on the directory, shared
// or exclusive, makes neither Sweep nor Write wait: the sweep removes
// nothing this time, and the write is written. Once the lock goes, the
// next sweep removes the dead writer's file.
func TestASweepNeverWaits(t *testing.T) {
	for _, how := range []int{syscall.LOCK_SH, syscall.LOCK_EX} {
		t.Run(map[int]string{syscall.LOCK_SH: "shared", syscall.LOCK_EX: "exclusive"}[how], func(t *testing.T) {
			dir := t.TempDir()
			dead := filepath.Join(dir, atomicfile.TempName("tensors.pb.gz", 7))
			require.NoError(t, os.WriteFile(dead, []byte("partial"), 0o600))
			d, err := os.Open(dir)
			require.NoError(t, err)
			require.NoError(t, syscall.Flock(int(d.Fd()), how))

			assert.Zero(t, atomicfile.Sweep(dir), "the directory is held: nothing removed, and no wait")
			require.NoError(t, atomicfile.Write(filepath.Join(dir, "summary.txt"), writeString("summary")))
			f, err := atomicfile.CreateTemp(dir, "heapdump")
			require.NoError(t, err, "a temporary file is made under another's lock too")
			require.NoError(t, f.Close())
			require.NoError(t, os.Remove(f.Name()))
			assert.FileExists(t, dead)

			require.NoError(t, d.Close())
			assert.Equal(t, 1, atomicfile.Sweep(dir))
			assert.NoFileExists(t, dead)
		})
	}
}

// TestASweepNeverFollowsASymlink: a link named as a temporary file, to a
// regular file nobody locks, stays, and so does the file it leads to.
func TestASweepNeverFollowsASymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "precious")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o600))
	link := filepath.Join(dir, atomicfile.TempName("tensors.pb.gz", 8))
	require.NoError(t, os.Symlink(victim, link))
	assert.Zero(t, atomicfile.Sweep(dir))
	st, err := os.Lstat(link)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, st.Mode().Type())
	assert.FileExists(t, victim)
}

// TestACreateTempFileIsSweptOnceItsWriterIsGone: CreateTemp's file is
// locked while open, and swept once closed.
func TestACreateTempFileIsSweptOnceItsWriterIsGone(t *testing.T) {
	dir := t.TempDir()
	f, err := atomicfile.CreateTemp(dir, "heapdump")
	require.NoError(t, err)
	assert.Zero(t, atomicfile.Sweep(dir), "a live writer's")
	require.NoError(t, f.Close())
	assert.Equal(t, 1, atomicfile.Sweep(dir))
	assert.NoFileExists(t, f.Name())
}
