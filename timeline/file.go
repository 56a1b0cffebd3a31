package timeline

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	if path == "" {
		return ErrEmptyPath
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("timeline: write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close() // the write already failed; that error is the one to report
			_ = os.Remove(tmp.Name())
			err = fmt.Errorf("timeline: write %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriterSize(tmp, 256<<10)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	// Sync before the rename: otherwise a crash could leave the name
	// pointing at data that never reached the disk.
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes the rename durable where the system allows it. The file is
// already complete under its name, so a failure here only means a crash in
// the next moments could bring the old file back.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}
