package atomicfile_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
)

func TestWriteReplacesWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.txt")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	require.NoError(t, atomicfile.Write(path, func(w io.Writer) error {
		_, err := io.WriteString(w, "new")
		return err
	}))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
}

func TestWriteKeepsTheReplacedFilesMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "private.pb.gz")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	require.NoError(t, os.Chmod(path, 0o600))
	require.NoError(t, atomicfile.Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }))
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}

func TestFailedWriteLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	boom := errors.New("boom")
	err := atomicfile.Write(path, func(w io.Writer) error {
		_, _ = io.WriteString(w, "partial")
		return boom
	})
	assert.ErrorIs(t, err, boom)
	got, _ := os.ReadFile(path)
	assert.Equal(t, "old", string(got), "the old file is untouched")
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "no temporary file is left")

	assert.ErrorIs(t, atomicfile.Write("", nil), atomicfile.ErrEmptyPath)
	assert.Error(t, atomicfile.Write(filepath.Join(dir, "missing", "x"), func(io.Writer) error { return nil }))
}

func Example() {
	path := filepath.Join(os.TempDir(), "atomicfile-example.txt")
	defer os.Remove(path)
	err := atomicfile.Write(path, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, "complete or not at all")
		return err
	})
	data, _ := os.ReadFile(path)
	fmt.Print(string(data), err)
	// Output:
	// complete or not at all
	// <nil>
}

// Every name the system allows can be written: the temporary file's name
// keeps only the start of the target's, so a 255-byte name (the usual
// NAME_MAX) leaves room for it.
func TestWriteLongestLegalName(t *testing.T) {
	dir := t.TempDir()
	for _, base := range []string{
		strings.Repeat("n", 255),
		strings.Repeat("é", 127) + "x", // 255 bytes, cut inside no character
	} {
		path := filepath.Join(dir, base)
		require.NoError(t, atomicfile.Write(path, writeString("whole")))
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, "whole", string(got))
	}
	for _, name := range names(t, dir) {
		assert.False(t, strings.HasPrefix(name, atomicfile.TempPrefix), "no temporary file is left: %s", name)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestPanickingWriteLeavesNoTemporaryFile guards the directory against a
// write function that panics: its temporary file is closed and removed,
// the target is untouched, and the panic reaches the caller.
func TestPanickingWriteLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	assert.PanicsWithValue(t, "write bug", func() {
		_ = atomicfile.Write(path, func(w io.Writer) error {
			_, _ = io.WriteString(w, "partial")
			panic("write bug")
		})
	})
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
}
