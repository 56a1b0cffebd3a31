package timeline

import (
	"fmt"
	"io"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
)

// ErrNotRegularFile means a file writer's path names something that is not
// a regular file (a directory, a device such as /dev/null, a FIFO, a
// socket), directly or through a symbolic link: writing would replace it
// with one. It is the same error as pprofexport.ErrNotRegularFile.
var ErrNotRegularFile = atomicfile.ErrNotRegular

// WriteTraceFile writes the trace (see WriteTrace) to path, replacing any
// regular file there. The file appears complete or not at all, and only
// regular files are written (see WriteSVGFile).
func (tl *Timeline) WriteTraceFile(path string) error {
	return writeFileAtomic(path, tl.writeTrace)
}

// WriteSVGFile writes the picture (see WriteSVG) to path, replacing any
// regular file there. It writes a temporary file in the same directory and
// renames it into place once complete and synced, so a crash, a full disk
// or a bad directory never leaves a partial file under path: on error the
// temporary file is removed and path is untouched.
//
// Only regular files are written: a path that exists and is anything else
// is an error matching ErrNotRegularFile. A symbolic link is followed, as
// os.WriteFile follows it: the file it leads to is replaced, in its own
// directory, and the link stays. Any name the system allows works.
func (tl *Timeline) WriteSVGFile(path string) error {
	return writeFileAtomic(path, tl.writeSVG)
}

func writeFileAtomic(path string, write func(io.Writer) error) error {
	if path == "" {
		return ErrEmptyPath
	}
	if err := atomicfile.Write(path, write); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	return nil
}
