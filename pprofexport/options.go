package pprofexport

import (
	"errors"
	"fmt"
	"slices"
	"time"

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
	// ErrNilWriter means a writer function was given a nil io.Writer.
	ErrNilWriter = errors.New("pprofexport: nil writer")
	// ErrSnapshotOrder means the snapshots of a diff or delta were passed
	// newest first.
	ErrSnapshotOrder = errors.New("pprofexport: snapshots out of order")
	// ErrTrackerMismatch means the snapshots of a diff or delta come from
	// two different trackers: their sites and cumulative counters have
	// nothing in common, so a difference would be meaningless.
	ErrTrackerMismatch = errors.New("pprofexport: snapshots of different trackers")
	// ErrEmptyPath means WriteFile was given an empty path.
	ErrEmptyPath = errors.New("pprofexport: empty path")
)

// Defaults and bounds of the handler's limits.
const (
	// DefaultMaxDeltaWindow is the longest ?seconds=N a handler accepts
	// unless MaxDeltaWindow says otherwise. It is above the delta windows
	// continuous profilers ask for at their usual scrape intervals (Parca
	// asks for the scrape interval, Grafana Alloy for the interval less one
	// second), for intervals up to five minutes.
	DefaultMaxDeltaWindow = 5 * time.Minute
	// DefaultMaxConcurrentDeltas is how many delta profiles a handler
	// computes at once unless MaxConcurrentDeltas says otherwise: one per
	// scraper and a few for people, each holding a snapshot of the sites.
	DefaultMaxConcurrentDeltas = 4

	minDeltaWindow      = time.Second // the unit of ?seconds=N
	maxDeltaWindow      = time.Hour
	maxConcurrentDeltas = 256
	maxLabelKeys        = 64
)

// Option configures how a profile is built (Profile, Write, WriteFile, the
// diff and delta functions, WriteText) or how a handler serves it
// (NewHandler). Options are checked where they are passed: a nil option,
// an invalid value, or an option that does not apply there is an error
// matching ErrInvalidOption that names the option.
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
	// labelKeys are the request label keys a profile carries; allLabels
	// lifts the list (the writers' default).
	labelKeys []string
	allLabels bool

	// older narrows the snapshot a writer is given (MinAge, Outlived).
	older track.Filter

	// handler only
	filter         track.Filter
	maxDeltaWindow time.Duration
	maxDeltas      int
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

func newConfig(s scope, opts []Option) (config, error) {
	c := config{scope: s}
	switch s {
	case scopeProfile:
		// A file goes where the program that writes it puts it: every
		// request label, so -tagfocus request=r-42 works on a dump.
		c.allLabels = true
	case scopeHandler:
		// An endpoint answers whoever reaches it: no request label unless
		// the server lists it (LabelKeys).
		c.maxDeltaWindow = DefaultMaxDeltaWindow
		c.maxDeltas = DefaultMaxConcurrentDeltas
	}
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

// keepsLabel reports whether a profile built with c carries the request
// label key.
func (c *config) keepsLabel(key string) bool {
	return c.allLabels || slices.Contains(c.labelKeys, key)
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

// LabelKeys lists the request labels (track.WithLabels) a profile carries,
// by key; the others are left out, and the samples that differed only by
// them add up. The tensors' own attributes (dtype, device, kind, shape,
// bytes, leaked) are always written. LabelKeys() with no key writes no
// request label.
//
// The default differs by where a profile goes. The writers (Profile,
// Write, WriteFile, WriteText, the diff and delta functions) keep every
// request label: the program chose to write the file. A handler keeps
// none: whoever reaches the endpoint reads what it serves, and request
// labels often carry request ids, tenants or users. List the keys an
// endpoint may show, such as LabelKeys("model", "route").
//
// Between 0 and 64 keys, each non-empty; repeating a key is harmless.
func LabelKeys(keys ...string) Option {
	keys = slices.Clone(keys) // the caller may reuse its slice
	return optionFunc(func(c *config) error {
		if len(keys) > maxLabelKeys {
			return fmt.Errorf("%w: LabelKeys with %d keys: want at most %d", ErrInvalidOption, len(keys), maxLabelKeys)
		}
		if slices.Contains(keys, "") {
			return fmt.Errorf("%w: LabelKeys(%q): empty key", ErrInvalidOption, keys)
		}
		c.labelKeys = keys
		c.allLabels = false
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

// MinAge restricts a profile to tensors at least d old: the old-leak view.
// A slow leak of small tensors sits below go tool pprof -top's cut-off
// when in-flight activations dominate the live set; among old tensors it
// is the first row. Given to Profile, Write, WriteFile or WriteText, it
// narrows the snapshot (track.Snapshot.Select), which must list its
// allocations, as Tracker.Snapshot's does; given to NewHandler, it is the
// default of ?min_age=. d >= 0; 0 keeps every tensor. It does not apply to
// the diff and delta functions.
func MinAge(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if err := (track.Filter{MinAge: d}).Validate(); err != nil {
			return fmt.Errorf("%w: MinAge(%v): %w", ErrInvalidOption, d, err)
		}
		c.ageFilter().MinAge = d
		return nil
	})
}

// Outlived restricts a profile to tensors that outlived their request
// (track.Filter.Outlived): what a growth watcher judges. It applies where
// MinAge does, as the default of ?outlived= for a handler.
func Outlived() Option {
	return optionFunc(func(c *config) error {
		c.ageFilter().Outlived = true
		return nil
	})
}

// ageFilter returns the filter that MinAge and Outlived set: a handler's
// default filter, or the one a writer narrows its snapshot with.
func (c *config) ageFilter() *track.Filter {
	if c.scope == scopeHandler {
		return &c.filter
	}
	return &c.older
}

// narrow applies MinAge and Outlived to the snapshot a writer was given.
func (c *config) narrow(snap *track.Snapshot) (*track.Snapshot, error) {
	if !c.older.Active() || snap == nil {
		return snap, nil
	}
	out, err := snap.Select(c.older)
	if err != nil {
		return nil, fmt.Errorf("%w: MinAge(%v)/Outlived: %w (take it with Tracker.Snapshot, or SnapshotOf with the filter)",
			ErrInvalidOption, c.older.MinAge, err)
	}
	return out, nil
}

// MaxDeltaWindow sets the longest delta window (?seconds=N) a handler
// accepts; a longer one is answered 400 with a text that states the limit.
// A delta holds a snapshot of the tracker's sites and a goroutine for its
// whole window, so an unbounded window lets one request hold them for
// days. Default DefaultMaxDeltaWindow (5m); between 1s and 1h, in whole
// seconds, as ?seconds=N counts. It applies to NewHandler only.
func MaxDeltaWindow(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if c.scope != scopeHandler {
			return fmt.Errorf("%w: MaxDeltaWindow applies to NewHandler only", ErrInvalidOption)
		}
		if d < minDeltaWindow || d > maxDeltaWindow || d%time.Second != 0 {
			return fmt.Errorf("%w: MaxDeltaWindow(%v): want whole seconds from %v to %v",
				ErrInvalidOption, d, minDeltaWindow, maxDeltaWindow)
		}
		c.maxDeltaWindow = d
		return nil
	})
}

// MaxConcurrentDeltas sets how many delta profiles (?seconds=N) a handler
// computes at once; a request beyond it is answered 429 Too Many Requests
// with a text that states the limit, at once, holding nothing. Default
// DefaultMaxConcurrentDeltas (4); between 0 and 256, where 0 turns delta
// profiles off (every ?seconds=N is answered 400). It applies to
// NewHandler only.
func MaxConcurrentDeltas(n int) Option {
	return optionFunc(func(c *config) error {
		if c.scope != scopeHandler {
			return fmt.Errorf("%w: MaxConcurrentDeltas applies to NewHandler only", ErrInvalidOption)
		}
		if n < 0 || n > maxConcurrentDeltas {
			return fmt.Errorf("%w: MaxConcurrentDeltas(%d): want 0..%d", ErrInvalidOption, n, maxConcurrentDeltas)
		}
		c.maxDeltas = n
		return nil
	})
}
