package retainers

import (
	"fmt"
	"os"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
)

// A heap dump is written to the temporary directory and removed as soon as
// it is read; a process killed meanwhile (a test binary past its -timeout,
// a CI job cancelled) leaves it behind, as large as the heap. Dumps follow
// the rule of every temporary file tensorlife writes (internal/atomicfile):
// a dump is an atomicfile.CreateTemp file, locked by its writer for as
// long as the writer has it open, and each search first sweeps the
// directory (atomicfile.Sweep), which removes exactly the dumps whose
// writers are gone, however new, and never a live search's, however old.
// No age or process id is consulted, and the sweep never waits on a lock.

// dumpBase is what a dump's temporary name carries after atomicfile's
// prefix: ".tensorlife-tmp-heapdump.<random>-<check>.tmp".
const dumpBase = "heapdump"

// dumpDir is where dumps are written; tests point it elsewhere.
var dumpDir = os.TempDir

// createDump sweeps dir of the dumps dead searches left and creates this
// search's dump file there, locked until it is closed.
func createDump(dir string) (*os.File, error) {
	atomicfile.Sweep(dir) // housekeeping: a search that cannot sweep still searches
	f, err := atomicfile.CreateTemp(dir, dumpBase)
	if err != nil {
		return nil, fmt.Errorf("retainers: heap dump file: %w", err)
	}
	return f, nil
}
