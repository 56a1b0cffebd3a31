// Package atomicfile writes a file so that it appears complete or not at
// all: profiles, traces and pictures that a crash, a full disk or a bad
// directory must never leave half written.
//
// The data goes to a temporary file in the target's directory, named with
// TempPrefix, which is synced and renamed over the target.
//
// # Temporary files of writers that died
//
// A writer killed before its rename (SIGKILL, a crash, a lost machine)
// leaves its temporary file behind, as large as what it had written. The
// rule that finds such files is a lock, not a guess: a writer holds an
// exclusive flock on its temporary file from the moment it creates it to
// the moment it renames it, and the system drops that lock when the file is
// closed, however the process ends. Sweep (which every Write runs first in
// its directory, and which oomdump.New runs in its own) removes exactly the
// temporary files it can lock: those of writers that are gone. A live
// writer's file is locked, in this process or any other, so it is never
// removed, however old; a dead writer's is removed at the next sweep,
// however new. No process id, age or clock is consulted. A writer takes its
// file's lock under a shared lock of the directory and a sweep holds the
// directory's exclusive lock, so a sweep never meets a file that a writer
// has made and not locked yet. Only files this package named are touched: a
// temporary name carries a check that other programs' files, even named
// alike, fail. On a system without flock (Windows, Solaris, AIX, ...) no
// lock can tell a dead writer from a live one, and the sweep removes
// nothing. CreateTemp makes such a file for a writer that renames nothing
// (a heap dump read back and removed), swept by the same rule.
//
// A sweep never waits, and never follows a symbolic link. Every lock is
// taken without waiting (LOCK_NB): a sweep that cannot have the
// directory's lock (another program holds a flock on it, shared or
// exclusive, or another sweep runs) removes nothing this time; a file it
// cannot lock is a live writer's and is kept; a writer that cannot have
// the directory's shared lock writes all the same, and checks, once its
// file is locked, that no sweep took it meanwhile. A sweep touches only
// regular files, opened without following a link.
//
// Only regular files are written. A rename replaces whatever name it
// lands on, so a target that exists and is anything else (a directory, a
// device node such as /dev/null, a FIFO, a socket) is refused with
// ErrNotRegular rather than replaced by a regular file. A symbolic link is
// followed, as os.WriteFile follows it: the file it points to is written,
// atomically, in that file's own directory, and the link stays a link.
//
// Bad input: Write refuses an empty path with ErrEmptyPath and a target
// that is not a regular file with ErrNotRegular; its other errors, and
// CreateTemp's, are the system's, wrapped with the path. Sweep returns no
// error.
package atomicfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

var (
	// ErrEmptyPath means Write was given no path.
	ErrEmptyPath = errors.New("atomicfile: empty path")
	// ErrNotRegular means the target exists and is not a regular file (or
	// a symbolic link to one): a directory, a device, a FIFO, a socket.
	// Packages that write files export it under their own name.
	ErrNotRegular = errors.New("not a regular file")
)

const (
	// TempPrefix starts the name of every temporary file Write makes, so a
	// leftover one is recognisable as such (by people and by the sweep)
	// and no other file is ever taken for one.
	TempPrefix = ".tensorlife-tmp-"
	// tempBaseBytes is how much of the target's name a temporary file's
	// name keeps, so a person can tell whose it is: a temporary name stays
	// under 80 bytes, and any name the system allows can be written.
	tempBaseBytes = 32
	// maxLinks bounds the symbolic links followed to the target, as the
	// system bounds them (Linux: 40).
	maxLinks = 40
)

// Write calls write with a buffered writer on a temporary file in the
// target's directory, then syncs the file and renames it to the target,
// replacing any regular file there. The target is path, or, where path is
// a symbolic link, the file the link leads to. On any error the temporary
// file is removed, the target is left as it was, and the error (wrapped
// with the path) is returned; a target that exists and is not a regular
// file is an error matching ErrNotRegular, checked before anything is
// written (a file that another process puts there meanwhile is replaced).
//
// A replaced file keeps its permission bits. A new file gets 0666 less the
// process's umask, as os.WriteFile and os.Create give, so a service that
// runs with umask 077 writes private profiles. Before writing, Write
// sweeps the directory (Sweep): the temporary files of writers that died
// go; errors of that sweep are ignored, as it is housekeeping and not part
// of this write. A write that panics leaves no temporary file either; the
// panic goes on to the caller.
func Write(path string, write func(io.Writer) error) (err error) {
	if path == "" {
		return ErrEmptyPath
	}
	target, st, err := resolve(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	Sweep(dir)
	tmp, err := createTemp(dir, base)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed := false
	defer func() {
		// Also when write panics or exits the goroutine: the temporary
		// file is closed and removed either way, and the panic goes on.
		if !renamed {
			_ = tmp.Close() // the write already failed; that error is the one to report
			_ = os.Remove(tmp.Name())
		}
		if err != nil {
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
	if st != nil {
		if err = tmp.Chmod(st.Mode().Perm()); err != nil {
			return err
		}
	}
	if !canLock {
		// Without locks nothing is held across the rename, and some
		// systems (Windows) refuse to rename an open file.
		if err = tmp.Close(); err != nil {
			return err
		}
	}
	// With locks the rename comes first: the file stays locked until its
	// temporary name is gone, so no sweep can take it for a dead writer's
	// in between.
	if err = os.Rename(tmp.Name(), target); err != nil {
		return err
	}
	renamed = true
	if canLock {
		// Synced, so its data is on disk under the target's name; an
		// error closing it has nothing left to report.
		_ = tmp.Close()
	}
	syncDir(dir)
	return nil
}

// resolve returns the file that writing path writes: path itself, or the
// end of the chain of symbolic links path starts, and that file's
// information, nil if it does not exist yet. A file that exists and is not
// regular is refused with ErrNotRegular.
func resolve(path string) (string, fs.FileInfo, error) {
	target := path
	for range maxLinks {
		st, err := os.Lstat(target)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return target, nil, nil // a new file, or a link to one
		case err != nil:
			return "", nil, err
		case st.Mode().IsRegular():
			return target, st, nil
		case st.Mode()&fs.ModeSymlink == 0:
			if target != path {
				return "", nil, fmt.Errorf("%w: %s is %s", ErrNotRegular, target, describe(st.Mode()))
			}
			return "", nil, fmt.Errorf("%w: %s", ErrNotRegular, describe(st.Mode()))
		}
		dest, err := os.Readlink(target)
		if err != nil {
			return "", nil, err
		}
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(filepath.Dir(target), dest)
		}
		target = dest
	}
	return "", nil, &fs.PathError{Op: "readlink", Path: path, Err: errors.New("too many levels of symbolic links")}
}

// describe names the kind of a file that is not regular.
func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a file of mode " + m.String()
}

// CreateTemp creates a new temporary file for base in dir, named and
// locked as Write's are, for a writer that reads its file back and
// removes it rather than rename it (a heap dump): while f is open no
// Sweep removes it, and once the writer is gone, however it ended, the
// next Sweep of dir does. The caller closes and removes it.
func CreateTemp(dir, base string) (f *os.File, err error) {
	if dir == "" {
		dir = "."
	}
	return createTemp(dir, base)
}

// createTemp creates a new temporary file for base in dir, named with
// TempPrefix, at most tempBaseBytes of base (so that a long legal name
// still leaves room), a random number and a check of the two (see
// tempName), so the sweep can tell this package's files from any other.
// The file is returned locked (see the package doc): it is created and
// locked under the directory's shared lock, which a sweep holds
// exclusively, so no sweep sees it unlocked. Where the directory's lock
// cannot be had (a file system without locks) the file is still checked,
// once locked, to be the one its name names, and made again if a sweep
// took it meanwhile. A file whose lock cannot be had is written all the
// same: a sweep on such a file system cannot lock it either, and keeps it.
//
// Unlike os.CreateTemp, which creates files 0600, it asks for 0666 and
// lets the system apply the umask (and a directory's default ACL), which
// is what a new file written by os.WriteFile gets; the umask cannot be
// read without changing it for the whole process.
func createTemp(dir, base string) (*os.File, error) {
	base = clip(base, tempBaseBytes)
	if canLock {
		if d, err := os.Open(dir); err == nil {
			defer d.Close()         // closing it drops the shared lock
			_, _ = tryLockShared(d) // a sweep's, or another program's: the check below
		}
	}
	for range 10000 {
		name := filepath.Join(dir, tempName(base, rand.Uint64()))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil || !canLock {
			return f, err
		}
		locked, err := tryLockExclusive(f)
		if err != nil {
			return f, nil // a file system whose locks say nothing: no sweep can lock it either
		}
		if locked && named(f, name) {
			return f, nil
		}
		// A sweep holds it, or removed it before it was locked: make another.
		_ = f.Close()
		if locked {
			continue
		}
		_ = os.Remove(name) // the sweep holding it removes it, or this does
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, TempPrefix+base+".*.tmp"), Err: fs.ErrExist}
}

// named reports whether name still names the file f has open.
func named(f *os.File, name string) bool {
	open, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Lstat(name)
	return err == nil && os.SameFile(open, now)
}

// tempName is the name of a temporary file for base (already clipped):
// TempPrefix, base, then the random number n and a check of base and n,
// both in base 36, and ".tmp". The check is what makes a name this
// package's own: another program's file that happens to share the prefix
// and suffix fails it (one chance in 36⁶), so the sweep never removes it.
func tempName(base string, n uint64) string {
	return TempPrefix + base + "." + strconv.FormatUint(n, 36) + "-" + tempCheck(base, n) + ".tmp"
}

// tempCheck is the six base-36 digits that end a temporary name's number.
func tempCheck(base string, n uint64) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(base)) // a hash never fails to write
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	_, _ = h.Write(b[:])
	const digits = 36 * 36 * 36 * 36 * 36 * 36
	check := strconv.FormatUint(h.Sum64()%digits, 36)
	return strings.Repeat("0", 6-len(check)) + check
}

// ownTemp reports whether name is one tempName makes.
func ownTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, TempPrefix)
	if !ok {
		return false
	}
	if rest, ok = strings.CutSuffix(rest, ".tmp"); !ok {
		return false
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 {
		return false
	}
	base, num := rest[:dot], rest[dot+1:]
	digits, check, ok := strings.Cut(num, "-")
	if !ok || len(base) > tempBaseBytes || len(check) != 6 || digits == "" || strings.ToLower(digits) != digits {
		return false
	}
	n, err := strconv.ParseUint(digits, 36, 64)
	return err == nil && strconv.FormatUint(n, 36) == digits && tempCheck(base, n) == check
}

// clip returns at most n bytes of s, cut at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Sweep removes the temporary files in dir that writers of this package
// left when they died before their rename, and returns how many it
// removed: the regular files whose names tempName made (prefix, number and
// check) and that no open file holds locked (see the package doc). A live
// writer's file, in this process or another, is kept; so is a file of
// another program's, however like ours its name. Sweep holds the
// directory's exclusive lock while it runs, taken without waiting: when
// another open file holds a lock on the directory it removes nothing, at
// once. It never waits on a lock and never follows a symbolic link.
// Errors are ignored (a directory that cannot be read is swept of
// nothing): the sweep is housekeeping. Where the system has no flock,
// Sweep removes nothing.
func Sweep(dir string) (removed int) {
	if !canLock {
		return 0
	}
	d, err := os.Open(dir)
	if err != nil {
		return 0
	}
	defer d.Close() // closing it drops the lock
	if ok, err := tryLockExclusive(d); !ok || err != nil {
		// Writers may be making files the sweep would find unlocked (or
		// another program holds the directory): it cannot tell those from
		// dead writers', so it keeps them all, and does not wait.
		return 0
	}
	for {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			if e.Type().IsRegular() && ownTemp(e.Name()) && removeAbandoned(filepath.Join(dir, e.Name())) {
				removed++
			}
		}
		if err != nil {
			return removed
		}
	}
}

// removeAbandoned removes the temporary file path if no open file holds
// it locked, and reports whether it did.
func removeAbandoned(path string) bool {
	f, err := openToLock(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	if ok, err := tryLockExclusive(f); !ok || err != nil {
		return false // a live writer's, or a file system whose locks say nothing
	}
	// Locked now, so no writer holds it; it may have been renamed over its
	// target in the moment before, and then its name is gone or another's.
	return named(f, path) && os.Remove(path) == nil
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
