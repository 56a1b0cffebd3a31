package pprofexport

import (
	"errors"
	"fmt"

	"github.com/tensorlife/tensorlife/track"
)

// Errors returned by this package. Each error it returns matches one of
// these with errors.Is, or wraps an I/O error from the writer or the file
// system.
var (
	// ErrInvalidOption means an option's value cannot be used, or the option
	// makes no sense where it was passed (WithFilter given to Write).
	ErrInvalidOption = errors.New("pprofexport: invalid option")
	// ErrNilSnapshot means a nil *track.Snapshot was passed.
	ErrNilSnapshot = errors.New("pprofexport: nil snapshot")
	// ErrNilTracker means NewHandler was given a nil *track.Tracker.
	ErrNilTracker = errors.New("pprofexport: nil tracker")
	// ErrSnapshotOrder means the snapshots of a diff or delta were passed
	// newest first.
	ErrSnapshotOrder = errors.New("pprofexport: snapshots out of order")
	// ErrEmptyPath means WriteFile was given an empty path.
	ErrEmptyPath = errors.New("pprofexport: empty path")
)

// Option configures how a profile is built (Profile, Write, WriteFile, the
// diff and delta functions, WriteText) or how a handler serves it
// (NewHandler). Options are checked where they are passed: an invalid value,
// or an option that does not apply there, is an error matching
// ErrInvalidOption.
type Option interface {
	apply(*config) error
}

// scope says where options are being applied, so that an option that does
// not apply there is refused rather than ignored.
type scope uint8

const (
	scopeProfile scope = iota // Profile, Write, WriteFile, diffs, WriteText
	scopeHandler              // NewHandler
)

type config struct {
	scope       scope
	keepLibrary bool

	filter track.Filter // handler only
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

func newConfig(s scope, opts []Option) (config, error) {
	c := config{scope: s}
	for _, o := range opts {
		if o == nil {
			return config{}, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o.apply(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

// KeepLibraryFrames keeps tensorlife's own frames (tensor.New, the pool, the
// tracker) at the leaf end of every stack. By default they are trimmed, so
// the leaf of each stack is the caller's line that asked for memory; keep
// them when debugging tensorlife itself.
func KeepLibraryFrames(keep bool) Option {
	return optionFunc(func(c *config) error {
		c.keepLibrary = keep
		return nil
	})
}

// WithFilter sets the filter a handler snapshots with before its query
// parameters are applied: a query parameter overrides the matching field
// (min_age, kind, leaked), and Labels always apply. Use it to serve, say,
// only "kv-cache" tensors on one path. It applies to NewHandler only; the
// writers take a snapshot that was already filtered (track.Tracker.SnapshotOf).
// A filter that does not validate, or that asks for Allocations (a profile
// never lists allocations one by one), is refused.
func WithFilter(f track.Filter) Option {
	return optionFunc(func(c *config) error {
		if c.scope != scopeHandler {
			return fmt.Errorf("%w: WithFilter applies to NewHandler only; filter with track.Tracker.SnapshotOf", ErrInvalidOption)
		}
		if err := f.Validate(); err != nil {
			return fmt.Errorf("%w: WithFilter: %w", ErrInvalidOption, err)
		}
		if f.Allocations {
			return fmt.Errorf("%w: WithFilter: Filter.Allocations makes no sense for a profile", ErrInvalidOption)
		}
		c.filter = f
		return nil
	})
}
