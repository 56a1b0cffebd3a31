package pprofexport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tensorlife/tensorlife/internal/option"
	"github.com/tensorlife/tensorlife/track"
)

// Errors returned by this package. Each error it returns matches one of
// these with errors.Is, or wraps an I/O error from the writer or the file
// system.
var (
	// ErrInvalidOption means an option's value cannot be used, or a nil
	// option was passed.
	ErrInvalidOption = errors.New("pprofexport: invalid option")
	// ErrNilSnapshot means a nil *track.Snapshot was passed.
	ErrNilSnapshot = errors.New("pprofexport: nil snapshot")
	// ErrNilWriter means a writer function was given a nil io.Writer.
	ErrNilWriter = errors.New("pprofexport: nil writer")
	// ErrSnapshotOrder means the snapshots of a diff or delta were passed
	// newest first.
	ErrSnapshotOrder = errors.New("pprofexport: snapshots out of order")
	// ErrTrackerMismatch means the snapshots of a diff or delta come from
	// two different trackers: their sites and cumulative counters have
	// nothing in common, so a difference would be meaningless.
	ErrTrackerMismatch = errors.New("pprofexport: snapshots of different trackers")
	// ErrFilterMismatch means the snapshots of a delta were taken with
	// different filters: the change of what one selected to what the other
	// selected is not a change over the window.
	ErrFilterMismatch = errors.New("pprofexport: snapshots taken with different filters")
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
	// scraper and a few for people, each holding the snapshot of its
	// window's start.
	DefaultMaxConcurrentDeltas = 4

	minDeltaWindow      = time.Second // the unit of ?seconds=N
	maxDeltaWindow      = time.Hour
	maxConcurrentDeltas = 256
	maxLabelKeys        = 64
)

// ProfileOption configures a profile of one snapshot: Profile, Write,
// WriteFile and WriteText.
type ProfileOption interface {
	applyProfile(*config) error
}

// DiffOption configures a profile of two snapshots: DiffProfile, WriteDiff
// and DeltaProfile.
type DiffOption interface {
	applyDiff(*config) error
}

// HandlerOption configures NewHandler.
type HandlerOption interface {
	applyHandler(*config) error
}

// FormatOption says how stacks and labels are written; every function of
// the package takes it.
type FormatOption interface {
	ProfileOption
	DiffOption
	HandlerOption
}

// AgeOption narrows a profile to old tensors: the snapshot a writer is
// given, or the default filter of a handler.
type AgeOption interface {
	ProfileOption
	HandlerOption
}

type config struct {
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
	maxProfiles    int // see MaxConcurrentProfiles
	// window waits out a delta's window; nil waits on the real clock. Tests
	// set it so that a window costs them no time.
	window func(ctx context.Context, d time.Duration) error
	// now is the clock ?gc=1's rate limit reads; nil is time.Now. Tests
	// set it to step past GCInterval at once.
	now func() time.Time
}

// formatOption applies to every family.
type formatOption func(*config) error

func (f formatOption) applyProfile(c *config) error { return f(c) }
func (f formatOption) applyDiff(c *config) error    { return f(c) }
func (f formatOption) applyHandler(c *config) error { return f(c) }

// ageOption sets the filter a writer narrows its snapshot with, or a
// handler's default filter.
type ageOption func(*track.Filter) error

func (f ageOption) applyProfile(c *config) error { return f(&c.older) }
func (f ageOption) applyHandler(c *config) error { return f(&c.filter) }

type handlerOption func(*config) error

func (f handlerOption) applyHandler(c *config) error { return f(c) }

// A file goes where the program that writes it puts it: every request
// label, so -tagfocus request=r-42 works on a dump.
func newProfileConfig(opts []ProfileOption) (config, error) {
	c := config{allLabels: true}
	err := option.Apply(&c, opts, ProfileOption.applyProfile, ErrInvalidOption)
	return c, err
}

func newDiffConfig(opts []DiffOption) (config, error) {
	c := config{allLabels: true}
	err := option.Apply(&c, opts, DiffOption.applyDiff, ErrInvalidOption)
	return c, err
}

// An endpoint answers whoever reaches it: no request label unless the
// server lists it (LabelKeys).
func newHandlerConfig(opts []HandlerOption) (config, error) {
	c := config{maxDeltaWindow: DefaultMaxDeltaWindow, maxDeltas: DefaultMaxConcurrentDeltas,
		maxProfiles: DefaultMaxConcurrentProfiles}
	err := option.Apply(&c, opts, HandlerOption.applyHandler, ErrInvalidOption)
	return c, err
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
func KeepLibraryFrames(keep bool) FormatOption {
	return formatOption(option.Set(keep, func(c *config, keep bool) { c.keepLibrary = keep }))
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
func LabelKeys(keys ...string) FormatOption {
	keys = slices.Clone(keys) // the caller may reuse its slice
	return formatOption(func(c *config) error {
		if len(keys) > maxLabelKeys {
			return fmt.Errorf("LabelKeys with %d keys: want at most %d", len(keys), maxLabelKeys)
		}
		if slices.Contains(keys, "") {
			return fmt.Errorf("LabelKeys(%q): empty key", keys)
		}
		c.labelKeys = keys
		c.allLabels = false
		return nil
	})
}

// Filter sets the filter a handler snapshots with before its query
// parameters are applied: a query parameter overrides the matching field
// (min_age, kind, leaked), and Labels always apply. Use it to serve, say,
// only "kv-cache" tensors on one path. The writers take a snapshot that
// was already filtered (track.Tracker.SnapshotOf) instead. A filter that
// does not validate, or that asks for Allocations (a profile never lists
// allocations one by one), is refused.
func Filter(f track.Filter) HandlerOption {
	return handlerOption(func(c *config) error {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("Filter: %w", err)
		}
		if f.Allocations {
			return errors.New("Filter: Filter.Allocations makes no sense for a profile")
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
// default of ?min_age=. d >= 0; 0 keeps every tensor.
func MinAge(d time.Duration) AgeOption {
	return ageOption(func(f *track.Filter) error {
		if err := (track.Filter{MinAge: d}).Validate(); err != nil {
			return fmt.Errorf("MinAge(%v): %w", d, err)
		}
		f.MinAge = d
		return nil
	})
}

// Outlived restricts a profile to tensors that outlived their request
// (track.Filter.Outlived): what a growth watcher judges. It applies where
// MinAge does, as the default of ?outlived= for a handler.
func Outlived() AgeOption {
	return ageOption(option.Set(true, func(f *track.Filter, on bool) { f.Outlived = on }))
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
// A delta holds the snapshot of its start and a goroutine for its
// whole window, so an unbounded window lets one request hold them for
// days. Default DefaultMaxDeltaWindow (5m); between 1s and 1h, in whole
// seconds, as ?seconds=N counts.
func MaxDeltaWindow(d time.Duration) HandlerOption {
	return handlerOption(func(c *config) error {
		if d < minDeltaWindow || d > maxDeltaWindow || d%time.Second != 0 {
			return fmt.Errorf("MaxDeltaWindow(%v): want whole seconds from %v to %v", d, minDeltaWindow, maxDeltaWindow)
		}
		c.maxDeltaWindow = d
		return nil
	})
}

// MaxConcurrentDeltas sets how many delta profiles (?seconds=N) a handler
// computes at once; a request beyond it is answered 429 Too Many Requests
// with a text that states the limit, at once, holding nothing. Default
// DefaultMaxConcurrentDeltas (4); between 0 and 256, where 0 turns delta
// profiles off (every ?seconds=N is answered 400); with
// MaxConcurrentProfiles(0) too, NewHandler refuses the pair.
func MaxConcurrentDeltas(n int) HandlerOption {
	return handlerOption(option.Within("MaxConcurrentDeltas", n, 0, maxConcurrentDeltas, func(c *config, n int) { c.maxDeltas = n }))
}
