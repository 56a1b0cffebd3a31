package pprofexport

import (
	"compress/gzip"
	"fmt"
	"io"
	"sync"

	"github.com/tensorlife/tensorlife/internal/atomicfile"
	"github.com/tensorlife/tensorlife/track"
)

// Write writes the profile of snap (see Profile) to w, gzip-compressed as
// go tool pprof and continuous profilers expect. Its cost grows with the
// snapshot's groups and sites, not with the number of live tensors.
func Write(w io.Writer, snap *track.Snapshot, opts ...ProfileOption) error {
	if w == nil {
		return ErrNilWriter
	}
	snap, cfg, err := profileOf(snap, opts)
	if err != nil {
		return err
	}
	return compress(w, func(zw io.Writer) error { return stream(zw, snap, cfg) })
}

// profileOf checks what Profile checks and returns the snapshot a profile
// is written from, narrowed, and the configuration.
func profileOf(snap *track.Snapshot, opts []ProfileOption) (*track.Snapshot, config, error) {
	cfg, err := newProfileConfig(opts)
	if err != nil {
		return nil, cfg, err
	}
	if snap == nil {
		return nil, cfg, ErrNilSnapshot
	}
	snap, err = cfg.narrow(snap)
	return snap, cfg, err
}

// WriteDiff writes DiffProfile(before, after) to w, gzip-compressed.
func WriteDiff(w io.Writer, before, after *track.Snapshot, opts ...DiffOption) error {
	if w == nil {
		return ErrNilWriter
	}
	cfg, err := newDiffConfig(opts)
	if err != nil {
		return err
	}
	if err := checkPair(before, after, "diff"); err != nil {
		return err
	}
	return compress(w, func(zw io.Writer) error { return streamPair(zw, before, after, "diff", cfg) })
}

// ErrNotRegularFile means WriteFile's path names something that is not a
// regular file (a directory, a device such as /dev/null, a FIFO, a
// socket), directly or through a symbolic link: writing the profile would
// replace it with one. It is the same error as timeline.ErrNotRegularFile.
var ErrNotRegularFile = atomicfile.ErrNotRegular

// WriteFile writes the profile of snap to path, replacing any regular file
// there. It writes to a temporary file in the same directory and renames
// it into place once complete, so a crash or a full disk never leaves a
// torn profile under path: the reader sees the old file or the new one. On
// error the temporary file is removed and path is untouched. The writer
// holds a lock on it while it writes; a process killed meanwhile leaves it,
// unlocked, and the next write into that directory (or oomdump.New there)
// removes it.
//
// Only regular files are written: a path that exists and is anything else
// is an error matching ErrNotRegularFile. A symbolic link is followed, as
// os.WriteFile follows it: the file it leads to is replaced, in its own
// directory, and the link stays. Any name the system allows works.
func WriteFile(path string, snap *track.Snapshot, opts ...ProfileOption) error {
	snap, cfg, err := profileOf(snap, opts)
	if err != nil {
		return err
	}
	return writeFile(path, func(zw io.Writer) error { return stream(zw, snap, cfg) })
}

// gzipWriters keeps compressors between profiles: a new one allocates
// about a megabyte, which would be most of what a profile costs.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level
	return zw
}}

// compress writes what write writes gzip-compressed, at the speed-first
// level runtime/pprof uses: profiles are small and written while a
// service runs.
func compress(w io.Writer, write func(io.Writer) error) error {
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(w)
	err := write(zw)
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

// writeFile writes what write writes to path, compressed and atomically
// (see WriteFile).
func writeFile(path string, write func(io.Writer) error) error {
	if path == "" {
		return ErrEmptyPath
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { return compress(w, write) }); err != nil {
		return fmt.Errorf("pprofexport: %w", err)
	}
	return nil
}
