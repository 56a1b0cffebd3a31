package gomlxtrack

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/tensorlife/tensorlife/track"
)

// originals are GoMLX's own constructors of the backends Install knows, by
// name, under installMu: never a wrapped one, so that a second Install wraps
// them anew.
var originals = map[string]backends.Constructor{
	simplego.BackendName: simplego.New,
}

// installMu serializes Install and Know: backends.Register is not safe for
// concurrent use.
var installMu sync.Mutex

// ErrUnknownBackend is matched by Install's error when a backend is
// registered whose original constructor Install does not know (see Know):
// that backend is left untracked.
var ErrUnknownBackend = errors.New("gomlxtrack: registered backend of unknown constructor")

// Know tells Install GoMLX's own constructor of a backend this package does
// not link, so that Install wraps it: a program that links GoMLX's XLA
// backend calls gomlxtrack.Know("xla", xla.New) before Install. This
// package links only the pure-Go backend, "go", which it knows; linking XLA
// for every user would make it the default of backends.New. A nil
// constructor forgets name.
func Know(name string, original backends.Constructor) {
	installMu.Lock()
	defer installMu.Unlock()
	if original == nil {
		delete(originals, name)
		return
	}
	originals[name] = original
}

// Install re-registers the GoMLX backends registered at that moment with
// constructors that return them wrapped for tr (Wrap), so that backends.New,
// backends.NewWithConfig and backends.MustNew return tracked backends: one
// line at the start of a program, before it makes a backend. A later
// Install, with tr or another tracker, wraps GoMLX's original constructors
// for its tracker, never an already wrapped one.
//
// Install knows the constructor of "go", GoMLX's pure-Go backend, and those
// given to Know. A registered backend it does not know is left as it is,
// and Install, having wrapped the others, returns an error matching
// ErrUnknownBackend that names it. A nil tr is an error matching
// track.ErrNilTracker.
//
// Like backends.Register, Install must not run concurrently with the
// making of a backend.
func Install(tr *track.Tracker) error {
	if tr == nil {
		return fmt.Errorf("gomlxtrack.Install: %w", track.ErrNilTracker)
	}
	installMu.Lock()
	defer installMu.Unlock()
	names := backends.List()
	slices.Sort(names)
	var unknown []string
	for _, name := range names {
		c, ok := originals[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		backends.Register(name, func(config string) (backends.Backend, error) {
			b, err := c(config)
			if err != nil {
				return nil, err
			}
			return Wrap(b, tr), nil
		})
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: %q left untracked (tell Install its constructor with Know)", ErrUnknownBackend, unknown)
	}
	return nil
}
