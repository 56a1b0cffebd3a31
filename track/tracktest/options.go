package tracktest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tensorlife/tensorlife/internal/option"
	"github.com/tensorlife/tensorlife/track"
)

// ErrInvalidOption means an option's value cannot be used, or the option
// cannot apply where it was passed (IgnoreCurrent with Context).
var ErrInvalidOption = errors.New("tracktest: invalid option")

// Option configures a check. Options are made by the functions of this
// package only; each check validates its options in one place, and an
// invalid option fails the check instead of being ignored. An Option holds
// no state that a check changes: one value may be passed to many checks, from
// many goroutines.
type Option interface {
	apply(*config) error
}

// ScopeOption is an Option that Context takes too: every option but
// IgnoreCurrent, which a scope has no use for. Passing IgnoreCurrent to
// Context does not compile.
type ScopeOption interface {
	Option
	scopeOption()
}

// optionFunc is an option every check takes; checkOnly, one Context does
// not.
type (
	optionFunc func(*config) error
	checkOnly  func(*config) error
)

func (f optionFunc) apply(c *config) error { return f(c) }
func (optionFunc) scopeOption()            {}
func (f checkOnly) apply(c *config) error  { return f(c) }

// entry names the function a configuration is for, so that an option can
// refuse a place where it makes no sense.
type entry uint8

const (
	entryFind entry = iota
	entryVerifyNone
	entryTestMain
	entryContext
)

func (e entry) String() string {
	switch e {
	case entryVerifyNone:
		return "VerifyNone"
	case entryTestMain:
		return "VerifyTestMain"
	case entryContext:
		return "Context"
	default:
		return "Find"
	}
}

const (
	defaultRetries = 10
	defaultSettle  = time.Second
	// firstSleep is the first wait between attempts; each wait doubles it.
	firstSleep = time.Millisecond
	maxRetries = 1000
)

type config struct {
	entry   entry
	retries int
	settle  time.Duration

	// ignoreBefore, when set, ignores allocations recorded at or before it.
	ignoreBefore time.Time
	ignoreFuncs  []string
	ignoreKinds  []string
	ignoreLabels [][2]string
	allowMisuse  bool
	// retainers: a failing check names what keeps each leak alive
	// (Retainers, TENSORLIFE_RETAINERS=1).
	retainers bool
}

// AllowMisuse lets a check pass although a tensor was freed twice, or used
// after its Free, while it watched: for tests that misuse tensors on
// purpose. It applies to every check.
func AllowMisuse() ScopeOption {
	return optionFunc(option.Set(true, func(c *config, on bool) { c.allowMisuse = on }))
}

// newConfig applies opts for the entry point e and validates the result: the
// one place options are checked.
func newConfig(e entry, opts []Option) (*config, error) {
	c := &config{entry: e, retries: defaultRetries, settle: defaultSettle, retainers: retainersFromEnv}
	if err := option.Apply(c, opts, Option.apply, ErrInvalidOption); err != nil {
		return nil, fmt.Errorf("%w (passed to %v)", err, e)
	}
	return c, nil
}

// IgnoreCurrent ignores every tensor recorded before IgnoreCurrent was
// called, in whatever tracker the check reads: the tensors a test inherits
// from package setup, say. Write it where the test starts, typically as an
// argument of a deferred VerifyNone, whose arguments are evaluated at the
// defer statement:
//
//	defer tracktest.VerifyNone(t, tr, tracktest.IgnoreCurrent())
//
// The boundary is exact: IgnoreCurrent reads the monotonic clock and returns
// only once the clock has moved past that reading, so a tensor recorded
// before the call is ignored and one recorded after it is checked.
//
// Context does not take it: a scope holds only tensors made under its
// context, after it began.
func IgnoreCurrent() Option {
	mark := time.Now()
	// Wait out one tick of the monotonic clock (nanoseconds on most systems)
	// so that no later recording can share the mark's reading.
	for !time.Now().After(mark) {
	}
	return checkOnly(func(c *config) error {
		if c.ignoreBefore.IsZero() || mark.After(c.ignoreBefore) {
			c.ignoreBefore = mark
		}
		return nil
	})
}

// IgnoreSite ignores tensors whose allocation stack holds a frame of the
// named function anywhere in it, from the allocating line to the stack's
// root: a fully qualified name as reports print it,
// "github.com/acme/infer.(*Cache).Put" or "github.com/acme/infer.init".
// Ignoring a caller ignores everything allocated beneath it.
func IgnoreSite(function string) ScopeOption {
	return optionFunc(option.NotEmpty("IgnoreSite", "a function name", function,
		func(c *config, f string) { c.ignoreFuncs = append(c.ignoreFuncs, f) }))
}

// IgnoreKind ignores tensors of the given kind ("kv-cache", "mask"), as
// tensor.Spec.Kind named it.
func IgnoreKind(kind string) ScopeOption {
	return optionFunc(option.NotEmpty("IgnoreKind", "a kind", kind,
		func(c *config, kind string) { c.ignoreKinds = append(c.ignoreKinds, kind) }))
}

// IgnoreLabel ignores tensors made under a context carrying the label
// key=value (track.WithLabels). With Context, the key cannot be ScopeLabel:
// that would ignore the whole scope.
func IgnoreLabel(key, value string) ScopeOption {
	return optionFunc(func(c *config) error {
		if key == "" {
			return fmt.Errorf("IgnoreLabel(\"\", %q): want a key", value)
		}
		if c.entry == entryContext && key == ScopeLabel {
			return fmt.Errorf("IgnoreLabel(%q, %q) cannot be used with Context: "+
				"it would ignore the scope's own label", key, value)
		}
		c.ignoreLabels = append(c.ignoreLabels, [2]string{key, value})
		return nil
	})
}

// MaxRetries sets how many times a check that finds live tensors runs the
// garbage collector, waits and looks again before it fails (default 10).
// Zero checks once, without waiting: use it where nothing can still be
// freeing tensors and the test tracker keeps dropped tensors live.
func MaxRetries(n int) ScopeOption {
	return optionFunc(option.Within("MaxRetries", n, 0, maxRetries, func(c *config, n int) { c.retries = n }))
}

// MaxSettle bounds the total time a check waits between its attempts
// (default 1s). Waits start at a millisecond and double. Zero retries
// without waiting: each retry only runs the garbage collector and yields.
func MaxSettle(d time.Duration) ScopeOption {
	return optionFunc(option.AtLeast("MaxSettle", d, 0, func(c *config, d time.Duration) { c.settle = d }))
}

// ignored reports whether the options exclude a from the check.
func (c *config) ignored(a *track.Allocation) bool {
	if !c.ignoreBefore.IsZero() && !a.Time.After(c.ignoreBefore) {
		return true
	}
	if slices.Contains(c.ignoreKinds, a.Kind) {
		return true
	}
	for _, kv := range c.ignoreLabels {
		if v, ok := a.Labels.Get(kv[0]); ok && v == kv[1] {
			return true
		}
	}
	if len(c.ignoreFuncs) > 0 && a.Site != nil {
		for _, f := range a.Site.Frames() {
			if slices.Contains(c.ignoreFuncs, f.Function) {
				return true
			}
		}
	}
	return false
}
