package retainers

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSearchSweepsDumpsOfDeadProcesses guards the temporary directory
// against dumps left by processes killed while searching: the next search
// removes the files of this package's naming older than staleDumpAge, and
// leaves recent ones (a live search's) and every file of another naming.
func TestSearchSweepsDumpsOfDeadProcesses(t *testing.T) {
	dir := t.TempDir()
	defer func(f func() string) { dumpDir = f }(dumpDir)
	dumpDir = func() string { return dir }

	old := time.Now().Add(-2 * staleDumpAge)
	put := func(name string, at time.Time) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("go1.7 heap dump\n"), 0o600))
		require.NoError(t, os.Chtimes(p, at, at))
		return p
	}
	stale := []string{
		put(dumpPrefix+"4242-123456789", old), // a dead process's
		put(dumpPrefix+"987654321", old),      // named before dumps carried the process id
	}
	kept := []string{
		put(dumpPrefix+strconv.Itoa(os.Getpid()+1)+"-55", time.Now()), // a live search's, elsewhere
		put(dumpPrefix+"notes.txt", old),
		put(dumpPrefix+"12-ab", old),
		put(dumpPrefix+"-12", old),
		put(dumpPrefix, old),
		put("heapdump-4242-123", old),
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, dumpPrefix+"1-2"), 0o755))
	kept = append(kept, filepath.Join(dir, dumpPrefix+"1-2"))
	require.NoError(t, os.Chtimes(kept[len(kept)-1], old, old))

	_, err := findAlone()
	require.NoError(t, err)
	for _, p := range stale {
		assert.NoFileExists(t, p, "a dump of a dead process is removed")
	}
	for _, p := range kept {
		_, err := os.Stat(p)
		assert.NoError(t, err, "kept: recent, not a dump of this package's naming, or a directory")
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, len(kept), "the search removed its own dump")
}

func TestOwnDumpNames(t *testing.T) {
	for name, want := range map[string]bool{
		dumpPrefix + "1-2":                            true,
		dumpPrefix + "123":                            true,
		dumpPrefix + "123-456-789":                    false,
		dumpPrefix + "x":                              false,
		dumpPrefix + "1-":                             false,
		dumpPrefix + "123456789012345678901-1":        false,
		"x" + dumpPrefix + "1":                        false,
		dumpPrefix + strconv.Itoa(os.Getpid()) + "-1": true,
	} {
		assert.Equal(t, want, ownDump(name), name)
	}
}
