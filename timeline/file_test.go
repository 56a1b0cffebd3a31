package timeline_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/timeline"
	"github.com/tensorlife/tensorlife/track"
)

func TestWriteFilesAtomically(t *testing.T) {
	tr := newTracker(t, track.KeepHistory(1<<12))
	run(t, tr, 100)
	tl, err := timeline.Build(tr)
	require.NoError(t, err)

	writers := []struct {
		name  string
		write func(string) error
		check func(*testing.T, []byte)
	}{
		{"trace", tl.WriteTraceFile, func(t *testing.T, data []byte) { validateTrace(t, data, tl) }},
		{"svg", tl.WriteSVGFile, func(t *testing.T, data []byte) { parseSVG(t, data) }},
	}
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out."+w.name)
			require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
			require.NoError(t, w.write(path), "replaces the file")
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			w.check(t, data)
			info, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the replaced file keeps its mode")

			missing := filepath.Join(dir, "no", "such", "dir", "out")
			err = w.write(missing)
			assert.ErrorIs(t, err, os.ErrNotExist)
			assert.Contains(t, err.Error(), missing, "the error names the path")
			assert.NoFileExists(t, missing)

			// A path that is a directory cannot be replaced: the written
			// temporary file must not be left behind.
			sub := filepath.Join(dir, "adir")
			require.NoError(t, os.Mkdir(sub, 0o755))
			assert.Error(t, w.write(sub))
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			assert.ElementsMatch(t, []string{"out." + w.name, "adir"}, names, "no partial file")

			assert.ErrorIs(t, w.write(""), timeline.ErrEmptyPath)
		})
	}
}
