// Package atomicfile writes a file so that it appears complete or not at
// all: profiles, traces and pictures that a crash, a full disk or a bad
// directory must never leave half written.
//
// The data goes to a temporary file in the target's directory, named with
// TempPrefix, which is synced and renamed over the target. A writer killed
// before the rename leaves its temporary file behind; the next Write in
// that directory removes such files once they are older than StaleAfter.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrEmptyPath means Write was given no path.
var ErrEmptyPath = errors.New("atomicfile: empty path")

const (
	// TempPrefix starts the name of every temporary file Write makes, so a
	// leftover one is recognisable as such (by people and by the sweep)
	// and no other file is ever taken for one.
	TempPrefix = ".tensorlife-tmp-"
	// StaleAfter is how long after its last change a temporary file is
	// taken to be abandoned by a writer that died. A live writer touches
	// its file at each buffer flush and renames it within moments, so an
	// hour leaves a wide margin; removing a live writer's file by mistake
	// would only make that write fail (its rename finds no file), never
	// damage the target.
	StaleAfter = time.Hour
)

// Write calls write with a buffered writer on a temporary file in path's
// directory, then syncs the file and renames it to path, replacing any
// file there. On any error the temporary file is removed, path is left as
// it was, and the error (wrapped with the path) is returned.
//
// A replaced file keeps its permission bits. A new file gets 0666 less the
// process's umask, as os.WriteFile and os.Create give, so a service that
// runs with umask 077 writes private profiles. Before writing, Write
// removes temporary files of earlier writes to the same directory that
// were abandoned (see StaleAfter); errors of that sweep are ignored, as it
// is housekeeping and not part of this write.
func Write(path string, write func(io.Writer) error) (err error) {
	if path == "" {
		return ErrEmptyPath
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	removeStale(dir, time.Now())
	tmp, err := createTemp(dir, base)
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
	// A replaced file keeps its mode (a profile made private stays so). A
	// new one already has the mode the system gave it at creation.
	if st, statErr := os.Stat(path); statErr == nil {
		if err = tmp.Chmod(st.Mode().Perm()); err != nil {
			return err
		}
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

// createTemp creates a new temporary file for base in dir. Unlike
// os.CreateTemp, which creates files 0600, it asks for 0666 and lets the
// system apply the umask (and a directory's default ACL), which is what a
// new file written by os.WriteFile gets; the umask cannot be read without
// changing it for the whole process.
func createTemp(dir, base string) (*os.File, error) {
	prefix := filepath.Join(dir, TempPrefix+base+".")
	for range 10000 {
		name := prefix + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "createtemp", Path: prefix + "*.tmp", Err: fs.ErrExist}
}

// removeStale removes the temporary files in dir that a writer left behind
// when it died before its rename: regular files named with TempPrefix whose
// last change is more than StaleAfter before now.
func removeStale(dir string, now time.Time) {
	d, err := os.Open(dir)
	if err != nil {
		return // the write itself will report what is wrong with dir
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), TempPrefix) || !strings.HasSuffix(e.Name(), ".tmp") {
				continue
			}
			info, err := e.Info()
			if err != nil || now.Sub(info.ModTime()) <= StaleAfter {
				continue
			}
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
		if err != nil {
			return
		}
	}
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
