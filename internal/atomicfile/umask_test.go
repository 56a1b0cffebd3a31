//go:build unix

package atomicfile_test

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
)

// The umask is process-wide: these tests must not run in parallel with any
// other test of the package that creates files.
func TestNewFileHonoursUmask(t *testing.T) {
	tests := []struct {
		umask int
		want  fs.FileMode
	}{
		{0o022, 0o644},
		{0o027, 0o640},
		{0o077, 0o600},
		{0o002, 0o664},
	}
	for _, tt := range tests {
		t.Run(fs.FileMode(tt.umask).String(), func(t *testing.T) {
			old := syscall.Umask(tt.umask)
			defer syscall.Umask(old)

			dir := t.TempDir()
			path := filepath.Join(dir, "new.pb.gz")
			require.NoError(t, atomicfile.Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }))
			st, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, tt.want, st.Mode().Perm(), "as os.WriteFile(path, data, 0o666) would create it")

			ref := filepath.Join(dir, "ref")
			require.NoError(t, os.WriteFile(ref, []byte("x"), 0o666))
			refSt, err := os.Stat(ref)
			require.NoError(t, err)
			assert.Equal(t, refSt.Mode().Perm(), st.Mode().Perm())
		})
	}
}

func TestReplacedFileKeepsModeWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "shared.json")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	require.NoError(t, os.Chmod(path, 0o664))
	require.NoError(t, atomicfile.Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }))
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o664), st.Mode().Perm())
}
