// Package atomicfile writes a file so that it appears complete or not at
// all: profiles, traces and pictures that a crash, a full disk or a bad
// directory must never leave half written.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrEmptyPath means Write was given no path.
var ErrEmptyPath = errors.New("atomicfile: empty path")

// Write calls write with a buffered writer on a temporary file in path's
// directory, then syncs the file and renames it to path, replacing any
// file there. On any error the temporary file is removed, path is left as
// it was, and the error (wrapped with the path) is returned.
func Write(path string, write func(io.Writer) error) (err error) {
	if path == "" {
		return ErrEmptyPath
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close() // the write already failed; that error is the one to report
			_ = os.Remove(tmp.Name())
			err = fmt.Errorf("write %s: %w", path, err)
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
	// A replaced file keeps its mode (a profile made private stays so); a
	// new one is readable as files written with os.Create usually are.
	mode := os.FileMode(0o644)
	if st, statErr := os.Stat(path); statErr == nil {
		mode = st.Mode().Perm()
	}
	if err = tmp.Chmod(mode); err != nil {
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
