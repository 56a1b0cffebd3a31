//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package atomicfile

import (
	"errors"
	"os"
)

// canLock is false where the system has no flock: no lock tells a live
// writer's temporary file from a dead one's, so the sweep removes nothing.
const canLock = false

var errNoLock = errors.New("no file locks on this system")

func tryLockShared(*os.File) (bool, error) { return false, errNoLock }

func tryLockExclusive(*os.File) (bool, error) { return false, errNoLock }

func openToLock(string) (*os.File, error) { return nil, errNoLock }
