package timeline

import (
	"fmt"
	"io"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
)

// WriteTraceFile writes the trace (see WriteTrace) to path, replacing any
// file there. The file appears complete or not at all (see WriteSVGFile).
func (tl *Timeline) WriteTraceFile(path string) error {
	return writeFileAtomic(path, tl.writeTrace)
}

// WriteSVGFile writes the picture (see WriteSVG) to path, replacing any file
// there. It writes a temporary file in the same directory and renames it
// into place once complete and synced, so a crash, a full disk or a bad
// directory never leaves a partial file under path: on error the temporary
// file is removed and path is untouched.
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
