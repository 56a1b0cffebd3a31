package retainers

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A heap dump is written to the temporary directory and removed as soon as
// it is read; a process killed meanwhile (a test binary past its -timeout,
// a CI job cancelled) leaves it behind, as large as the heap. Each search
// first removes the dumps such processes left.
const (
	// dumpPrefix starts every dump's name: the prefix, the writing
	// process's id, "-" and os.CreateTemp's random digits.
	dumpPrefix = "tensorlife-heapdump-"
	// staleDumpAge is how long after its last change a dump is taken to be
	// abandoned. A live search writes its dump and reads it back within
	// its Timeout (10 s by default, the dump itself seconds for a large
	// heap), so an hour is far past any live one, also another process's.
	staleDumpAge = time.Hour
)

// dumpDir is where dumps are written; tests point it elsewhere.
var dumpDir = os.TempDir

// dumpPattern is the os.CreateTemp pattern of this process's dumps.
func dumpPattern() string { return dumpPrefix + strconv.Itoa(os.Getpid()) + "-*" }

// ownDump reports whether name is a dump's name, this package's naming and
// no other: the prefix, then digits, or digits, "-" and digits (earlier
// dumps carried no process id).
func ownDump(name string) bool {
	rest, ok := strings.CutPrefix(name, dumpPrefix)
	if !ok {
		return false
	}
	pid, random, hasPID := strings.Cut(rest, "-")
	if !hasPID {
		return digits(rest)
	}
	return digits(pid) && digits(random)
}

// digits reports whether s is 1 to 20 decimal digits.
func digits(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// removeStaleDumps removes from dir the regular files named as dumps
// (ownDump) whose last change is more than staleDumpAge before now: dumps
// left by processes that died while searching. Errors are ignored; the
// sweep is housekeeping, not part of the search.
func removeStaleDumps(dir string, now time.Time) (removed int) {
	d, err := os.Open(dir)
	if err != nil {
		return 0
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			if !e.Type().IsRegular() || !ownDump(e.Name()) {
				continue
			}
			info, err := e.Info()
			if err != nil || now.Sub(info.ModTime()) <= staleDumpAge {
				continue
			}
			if os.Remove(filepath.Join(dir, e.Name())) == nil {
				removed++
			}
		}
		if err != nil {
			return removed
		}
	}
}
