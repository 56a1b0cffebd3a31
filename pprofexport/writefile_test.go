package pprofexport_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
)

// WriteFile writes regular files only: a directory at the path is
// refused and left as it was; a symbolic link is followed to the file it
// names; any name the system allows works.
func TestWriteFileTargets(t *testing.T) {
	snap := newProgram(t).snapshot()
	dir := t.TempDir()

	sub := filepath.Join(dir, "adir")
	require.NoError(t, os.Mkdir(sub, 0o755))
	err := pprofexport.WriteFile(sub, snap)
	require.ErrorIs(t, err, pprofexport.ErrNotRegularFile)
	assert.Contains(t, err.Error(), "a directory")
	assert.DirExists(t, sub)

	long := filepath.Join(dir, strings.Repeat("p", 249)+".pb.gz") // 255 bytes
	require.NoError(t, pprofexport.WriteFile(long, snap))
	readProfile(t, long)

	if runtime.GOOS == "windows" {
		return // symbolic links need a privilege there
	}
	target := filepath.Join(dir, "tensors.pb.gz")
	require.NoError(t, os.WriteFile(target, []byte("old"), 0o600))
	link := filepath.Join(dir, "latest")
	require.NoError(t, os.Symlink("tensors.pb.gz", link))
	require.NoError(t, pprofexport.WriteFile(link, snap))
	st, err := os.Lstat(link)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, st.Mode().Type(), "the link stays a link")
	readProfile(t, target)
}

func readProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = profile.Parse(f)
	require.NoError(t, err, "%s holds a profile", path)
}
