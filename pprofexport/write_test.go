package pprofexport_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tensorlife/tensorlife/pprofexport"
)

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func parseFile(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	p, err := profile.Parse(f)
	require.NoError(t, err)
	return p
}

func TestWriteFileReplacesAtomically(t *testing.T) {
	prog := newProgram(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "tensors.pb.gz")
	require.NoError(t, os.WriteFile(path, []byte("an older profile"), 0o600))

	prog.masks("r1", 2)
	require.NoError(t, pprofexport.WriteFile(path, prog.snapshot()))

	assert.Equal(t, []string{"tensors.pb.gz"}, entries(t, dir), "no temporary file is left behind")
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), info.Mode().Perm(), "the replaced file keeps its mode")
	assert.Equal(t, int64(2), byLeaf(parseFile(t, path))[fnMasks][inuseObjects])

	// A relative path writes in the working directory.
	t.Chdir(dir)
	require.NoError(t, pprofexport.WriteFile("relative.pb.gz", prog.snapshot()))
	assert.Equal(t, int64(2), byLeaf(parseFile(t, filepath.Join(dir, "relative.pb.gz")))[fnMasks][inuseObjects])
}

func TestWriteFileUnwritablePath(t *testing.T) {
	prog := newProgram(t)
	prog.masks("r1", 1)
	snap := prog.snapshot()

	dir := t.TempDir()
	aFile := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(aFile, []byte("x"), 0o600))
	aDir := filepath.Join(dir, "dir")
	require.NoError(t, os.Mkdir(aDir, 0o755))

	tests := []struct {
		name string
		path string
		want error // nil: any error will do
	}{
		{"missing directory", filepath.Join(dir, "missing", "t.pb.gz"), fs.ErrNotExist},
		{"parent is a file", filepath.Join(aFile, "t.pb.gz"), nil},
		{"path is a directory", aDir, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pprofexport.WriteFile(tt.path, snap)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.path, "the error names the path")
			if tt.want != nil {
				assert.ErrorIs(t, err, tt.want)
			}
			assert.ElementsMatch(t, []string{"file", "dir"}, entries(t, dir), "nothing partial is left behind")
			assert.Empty(t, entries(t, aDir))
		})
	}
}
