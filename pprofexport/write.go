package pprofexport

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/google/pprof/profile"
	"github.com/tensorlife/tensorlife/track"
)

// Write writes the profile of snap (see Profile) to w, gzip-compressed as
// go tool pprof and continuous profilers expect. Its cost grows with the
// snapshot's groups and sites, not with the number of live tensors.
func Write(w io.Writer, snap *track.Snapshot, opts ...Option) error {
	p, err := Profile(snap, opts...)
	if err != nil {
		return err
	}
	return encode(w, p)
}

// WriteDiff writes DiffProfile(old, new) to w, gzip-compressed.
func WriteDiff(w io.Writer, old, new *track.Snapshot, opts ...Option) error {
	p, err := DiffProfile(old, new, opts...)
	if err != nil {
		return err
	}
	return encode(w, p)
}

// WriteFile writes the profile of snap to path, replacing any file there.
// It writes to a temporary file in the same directory and renames it into
// place once complete, so a crash or a full disk never leaves a torn
// profile under path: the reader sees the old file or the new one. On error
// the temporary file is removed and path is untouched.
func WriteFile(path string, snap *track.Snapshot, opts ...Option) error {
	p, err := Profile(snap, opts...)
	if err != nil {
		return err
	}
	return writeFile(path, p)
}

// gzipWriters keeps compressors between profiles: a new one allocates
// about a megabyte, which would be most of what a profile costs.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level
	return zw
}}

// encode writes p gzip-compressed, at the speed-first level runtime/pprof
// uses: profiles are small and written while a service runs.
func encode(w io.Writer, p *profile.Profile) error {
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(w)
	err := p.WriteUncompressed(zw)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	zw.Reset(io.Discard) // drop w
	gzipWriters.Put(zw)
	if err != nil {
		return fmt.Errorf("pprofexport: write profile: %w", err)
	}
	return nil
}

// writeFile writes p to path atomically (see WriteFile).
func writeFile(path string, p *profile.Profile) (err error) {
	if path == "" {
		return ErrEmptyPath
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("pprofexport: write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close() // the write already failed; report that
			_ = os.Remove(tmp.Name())
			err = fmt.Errorf("pprofexport: write %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriter(tmp)
	if err = encode(bw, p); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	// Sync before rename: otherwise a crash can leave the new name pointing
	// at a file whose data never reached the disk.
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

// syncDir makes a rename in dir durable where the system allows it. The
// profile is already complete under its name, so a failure here only means
// that a crash in the next moments could bring the old file back.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}
