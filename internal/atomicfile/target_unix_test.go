//go:build unix

package atomicfile_test

import (
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
)

// shortTempDir is a temporary directory whose name is short enough for a
// socket's path.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "af")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// A target that exists and is not a regular file is refused before
// anything is written, and stays what it was: a rename would have made
// each of these a regular file (as root, -profile /dev/null replaced
// /dev/null).
func TestWriteRefusesTargetsThatAreNotRegularFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		kind fs.FileMode
		says string
	}{
		{"directory", func(t *testing.T, path string) { require.NoError(t, os.Mkdir(path, 0o755)) }, fs.ModeDir, "a directory"},
		{"fifo", func(t *testing.T, path string) { require.NoError(t, syscall.Mkfifo(path, 0o644)) }, fs.ModeNamedPipe, "a named pipe"},
		{"socket", func(t *testing.T, path string) {
			// A socket's path is at most 108 bytes, which a long $TMPDIR
			// passes: bind it by its name, in its directory.
			t.Chdir(filepath.Dir(path))
			ln, err := net.Listen("unix", filepath.Base(path))
			require.NoError(t, err)
			t.Cleanup(func() { _ = ln.Close() })
		}, fs.ModeSocket, "a socket"},
		{"device node", func(t *testing.T, path string) {
			// A node like /dev/null (1, 3), made here: the real one must
			// never be at stake in a test that may run as root.
			if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
				t.Skipf("cannot make a device node here: %v", err)
			}
		}, fs.ModeDevice | fs.ModeCharDevice, "a character device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortTempDir(t)
			path := filepath.Join(dir, "t")
			tc.make(t, path)
			called := false
			err := atomicfile.Write(path, func(w io.Writer) error { called = true; return nil })
			require.ErrorIs(t, err, atomicfile.ErrNotRegular)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.says)
			assert.False(t, called, "nothing is written")
			st, err := os.Lstat(path)
			require.NoError(t, err)
			assert.Equal(t, tc.kind, st.Mode().Type(), "the target is what it was")
			assert.Empty(t, temporaries(t, dir))

			// The same through a symbolic link: the link is followed, and
			// what it leads to is refused.
			link := filepath.Join(dir, "link")
			require.NoError(t, os.Symlink("t", link))
			err = atomicfile.Write(link, writeString("x"))
			require.ErrorIs(t, err, atomicfile.ErrNotRegular)
			st, err = os.Lstat(link)
			require.NoError(t, err)
			assert.Equal(t, fs.ModeSymlink, st.Mode().Type(), "the link stays a link")
		})
	}
}

// A symbolic link is followed to the regular file it names, relative or
// absolute, through a chain: that file is replaced, in its own directory,
// with its mode kept, and the links stay links.
func TestWriteFollowsSymlinksToRegularFiles(t *testing.T) {
	dir := t.TempDir()
	realDir := filepath.Join(dir, "real")
	linkDir := filepath.Join(dir, "links")
	require.NoError(t, os.Mkdir(realDir, 0o755))
	require.NoError(t, os.Mkdir(linkDir, 0o755))
	target := filepath.Join(realDir, "tensors.pb.gz")
	require.NoError(t, os.WriteFile(target, []byte("old"), 0o600))
	require.NoError(t, os.Chmod(target, 0o640))
	relative := filepath.Join(linkDir, "relative")
	require.NoError(t, os.Symlink("../real/tensors.pb.gz", relative))
	chained := filepath.Join(linkDir, "chained")
	require.NoError(t, os.Symlink(relative, chained))

	for i, link := range []string{relative, chained} {
		want := strings.Repeat("new", i+1)
		require.NoError(t, atomicfile.Write(link, writeString(want)))
		got, err := os.ReadFile(target)
		require.NoError(t, err)
		assert.Equal(t, want, string(got))
		st, err := os.Stat(target)
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o640), st.Mode().Perm(), "the target keeps its mode")
		for _, l := range []string{relative, chained} {
			lst, err := os.Lstat(l)
			require.NoError(t, err)
			assert.Equal(t, fs.ModeSymlink, lst.Mode().Type())
		}
	}
	assert.Empty(t, temporaries(t, realDir))
	assert.Equal(t, []string{"chained", "relative"}, names(t, linkDir), "nothing was written beside the links")

	// A link to a file that does not exist yet creates it, as os.WriteFile
	// would.
	dangling := filepath.Join(linkDir, "dangling")
	require.NoError(t, os.Symlink("../real/new.json", dangling))
	require.NoError(t, atomicfile.Write(dangling, writeString("{}")))
	got, err := os.ReadFile(filepath.Join(realDir, "new.json"))
	require.NoError(t, err)
	assert.Equal(t, "{}", string(got))

	// A loop is an error, not a hang.
	loop := filepath.Join(linkDir, "loop")
	require.NoError(t, os.Symlink("loop", loop))
	err = atomicfile.Write(loop, writeString("x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too many levels of symbolic links")
}
