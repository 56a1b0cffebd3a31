package atomicfile_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

func age(t *testing.T, path string, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	require.NoError(t, os.Chtimes(path, old, old))
}

// TestStaleSweepLeavesOtherWritersFiles guards other programs' files from
// the sweep: a two-hour-old file named with the same prefix and suffix but
// not by this package (no check, a wrong check, a number out of form) is
// kept; this package's own file of the same age is removed.
func TestStaleSweepLeavesOtherWritersFiles(t *testing.T) {
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
	}
	for _, name := range append([]string{ours}, others...) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o600))
		age(t, p, 2*time.Hour)
	}
	require.NoError(t, atomicfile.Write(filepath.Join(dir, "out.txt"), writeString("new")))
	assert.NoFileExists(t, filepath.Join(dir, ours), "this package's abandoned file is removed")
	for _, name := range others {
		assert.FileExists(t, filepath.Join(dir, name), "another writer's file is kept")
	}
}

func TestWriteRemovesAbandonedTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, atomicfile.TempName("tensors.pb.gz", 12345))
	fresh := filepath.Join(dir, atomicfile.TempName("trace.json", 678))
	notOurs := filepath.Join(dir, ".tensors.pb.gz.123.tmp") // someone else's naming
	otherSuffix := filepath.Join(dir, atomicfile.TempPrefix+"notes")
	ourDir := filepath.Join(dir, atomicfile.TempPrefix+"dir.tmp")
	for _, p := range []string{stale, fresh, notOurs, otherSuffix} {
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o600))
	}
	require.NoError(t, os.Mkdir(ourDir, 0o755))
	for _, p := range []string{stale, notOurs, otherSuffix, ourDir} {
		age(t, p, atomicfile.StaleAfter+time.Minute)
	}
	age(t, fresh, atomicfile.StaleAfter-time.Minute)

	require.NoError(t, atomicfile.Write(filepath.Join(dir, "out.txt"), writeString("new")))

	assert.NoFileExists(t, stale, "an abandoned temporary file is removed")
	assert.FileExists(t, fresh, "a temporary file a live writer may still own is kept")
	assert.FileExists(t, notOurs, "files not named by atomicfile are never touched")
	assert.FileExists(t, otherSuffix)
	assert.DirExists(t, ourDir, "only regular files are removed")
}

// killedWriterEnv makes the test binary a writer that blocks in the middle
// of a write until it is killed.
const killedWriterEnv = "ATOMICFILE_TEST_KILLED_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(killedWriterEnv); path != "" {
		_ = atomicfile.Write(path, func(w io.Writer) error {
			_, _ = io.WriteString(w, "partial")
			os.Stdout.WriteString("writing\n")
			select {} // until killed
		})
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func TestKilledWriterLeavesNoTemporaryFileForever(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tensors.pb.gz")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killedWriterEnv+"="+path)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	buf := make([]byte, len("writing\n"))
	_, err = io.ReadFull(out, buf)
	require.NoError(t, err, "the writer started writing")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()

	left := temporaries(t, dir)
	require.Len(t, left, 1, "a killed writer leaves its temporary file")
	assert.True(t, strings.HasPrefix(left[0], atomicfile.TempPrefix+"tensors.pb.gz."), left[0])
	assert.NoFileExists(t, path)

	// A later write in the same directory keeps it while it is recent...
	require.NoError(t, atomicfile.Write(filepath.Join(dir, "trace.json"), writeString("{}")))
	assert.Equal(t, left, temporaries(t, dir))
	// ...and removes it once it is stale.
	age(t, filepath.Join(dir, left[0]), atomicfile.StaleAfter+time.Second)
	require.NoError(t, atomicfile.Write(path, writeString("profile")))
	assert.Empty(t, temporaries(t, dir))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "profile", string(got))
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
