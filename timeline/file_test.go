package timeline_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

			// A path that is a directory is refused, and no temporary
			// file is left behind.
			sub := filepath.Join(dir, "adir")
			require.NoError(t, os.Mkdir(sub, 0o755))
			assert.ErrorIs(t, w.write(sub), timeline.ErrNotRegularFile)
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

// The file writers follow a symbolic link to the regular file it names,
// and write any name the system allows.
func TestWriteFilesFollowLinksAndTakeLongNames(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need a privilege on Windows")
	}
	tr := newTracker(t, track.KeepHistory(1<<12))
	run(t, tr, 10)
	tl, err := timeline.Build(tr)
	require.NoError(t, err)
	for name, write := range map[string]func(string) error{"trace": tl.WriteTraceFile, "svg": tl.WriteSVGFile} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "target")
			require.NoError(t, os.WriteFile(target, []byte("old"), 0o600))
			link := filepath.Join(dir, "link")
			require.NoError(t, os.Symlink("target", link))
			require.NoError(t, write(link))
			st, err := os.Lstat(link)
			require.NoError(t, err)
			assert.Equal(t, os.ModeSymlink, st.Mode().Type(), "the link stays a link")
			data, err := os.ReadFile(target)
			require.NoError(t, err)
			assert.NotEqual(t, "old", string(data), "the file it names is written")

			long := filepath.Join(dir, strings.Repeat("x", 255))
			require.NoError(t, write(long))
			assert.FileExists(t, long)
		})
	}
}
