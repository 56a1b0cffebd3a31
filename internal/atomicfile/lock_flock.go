//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package atomicfile

import (
	"errors"
	"os"
	"syscall"
)

// canLock reports whether this system has flock, so that a temporary file's
// lock tells a live writer from a dead one and the sweep may run.
const canLock = true

// The locks are taken without waiting (LOCK_NB), each one: a sweep or a
// writer that finds a lock held by another open file, in this process or
// another, skips what it locks rather than wait on it, so no other
// program's flock on a directory can hang a write.

// tryLockExclusive locks f whole unless another open file holds a lock on
// it: false, nil when one does. The lock belongs to f's open file (not to
// the process or the thread), so it lasts until f is closed, in whatever
// way the process ends.
func tryLockExclusive(f *os.File) (bool, error) { return tryFlock(f, syscall.LOCK_EX) }

// tryLockShared takes f's shared lock unless another open file holds its
// exclusive lock: false, nil when one does.
func tryLockShared(f *os.File) (bool, error) { return tryFlock(f, syscall.LOCK_SH) }

func tryFlock(f *os.File, how int) (bool, error) {
	err := flock(f, how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), how)
			if !errors.Is(ferr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// openToLock opens path to take its lock: for writing where it may (an
// exclusive lock on NFS needs it), without following a link and without
// waiting on a FIFO that took a regular file's place.
func openToLock(path string) (*os.File, error) {
	const flags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	f, err := os.OpenFile(path, os.O_RDWR|flags, 0)
	if errors.Is(err, os.ErrPermission) {
		f, err = os.OpenFile(path, os.O_RDONLY|flags, 0)
	}
	return f, err
}
