package track

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tensorlife/tensorlife/internal/isnil"
)

// ErrInvalidOption means an option's value cannot be used, or the option
// makes no sense where it was passed (a watcher option given to New, say).
var ErrInvalidOption = errors.New("track: invalid option")

// Option configures a Tracker (New), a growth Watcher (NewWatcher) or a
// memory summary (WriteSummary): one option type for the package, each
// option documented with where it applies. Options are validated where they
// are passed: an invalid value, or an option passed where it does not
// apply, is an error matching ErrInvalidOption that names the option. Option
// values are immutable and may be shared.
type Option interface {
	apply(*options) error
}

// target says which constructor is applying options.
type target uint8

const (
	forTracker target = iota + 1
	forWatcher
	forSummary
)

func (t target) String() string {
	switch t {
	case forWatcher:
		return "NewWatcher"
	case forSummary:
		return "WriteSummary"
	}
	return "New"
}

// options gathers what every constructor may be given; each applies only
// its own part.
type options struct {
	target  target
	tracker config
	watcher watcherConfig
	summary summaryConfig
}

type optionFunc func(*options) error

func (f optionFunc) apply(o *options) error { return f(o) }

// only makes an option that applies where its target is being built.
func only(name string, f func(*options) error, where target) Option {
	return optionFunc(func(o *options) error {
		if o.target == where {
			return f(o)
		}
		return fmt.Errorf("%w: %s does not apply to %v", ErrInvalidOption, name, o.target)
	})
}

// applyOptions applies opts for target t onto o.
func applyOptions(o *options, t target, opts []Option) error {
	o.target = t
	for _, opt := range opts {
		if isnil.Value(opt) {
			return fmt.Errorf("%w: nil option passed to %v", ErrInvalidOption, t)
		}
		if err := opt.apply(o); err != nil {
			return err
		}
	}
	return nil
}

// Bounds of the tracker options.
const (
	// MaxSitesLimit bounds MaxSites.
	MaxSitesLimit = 1 << 24
	// MaxHistoryEvents bounds KeepHistory: about 64 bytes an event, 256 MiB
	// at the bound.
	MaxHistoryEvents = 1 << 22
)

type config struct {
	name          string
	maxSites      int
	onLeak        func(LeakReport)
	reclaimLeaks  bool
	logger        *slog.Logger
	historyEvents int
	framePointers bool
	helpers       *helperRules // HelperFunctions; nil if none
}

func defaultConfig() config {
	return config{
		name:          "tensorlife",
		maxSites:      4096,
		reclaimLeaks:  true,
		logger:        slog.Default(),
		framePointers: true,
	}
}

// WithName names the tracker in logs and reports (New).
func WithName(name string) Option {
	return only("WithName", func(o *options) error {
		if name == "" {
			return fmt.Errorf("%w: WithName(\"\"): want a name", ErrInvalidOption)
		}
		o.tracker.name = name
		return nil
	}, forTracker)
}

// MaxSites bounds the stack table (New): at most n distinct call stacks are
// kept, 1 <= n <= MaxSitesLimit (default 4096). Allocations from further
// stacks are counted under the overflow site, which reports show as
// OverflowFunction.
func MaxSites(n int) Option {
	return only("MaxSites", func(o *options) error {
		if n < 1 || n > MaxSitesLimit {
			return fmt.Errorf("%w: MaxSites(%d): want 1..%d", ErrInvalidOption, n, MaxSitesLimit)
		}
		o.tracker.maxSites = n
		return nil
	}, forTracker)
}

// OnLeak sets the function called when the garbage collector finds a tensor
// that was never freed (New). It runs on the runtime's cleanup goroutine: it
// must return quickly and must not block. The default logs a warning through
// the tracker's logger.
func OnLeak(f func(LeakReport)) Option {
	return only("OnLeak", func(o *options) error {
		if f == nil {
			return fmt.Errorf("%w: OnLeak(nil)", ErrInvalidOption)
		}
		o.tracker.onLeak = f
		return nil
	}, forTracker)
}

// ReclaimLeaks decides whether the memory of a tensor the garbage collector
// found leaked is returned to its allocator after the leak is reported
// (New). The default, true, keeps a leaking service alive while the leak is
// reported; false keeps the leaked tensor in the live set so profiles and
// tests show it.
func ReclaimLeaks(reclaim bool) Option {
	return only("ReclaimLeaks", func(o *options) error {
		o.tracker.reclaimLeaks = reclaim
		return nil
	}, forTracker)
}

// WithLogger sets the logger of the default leak and suspect reports (New;
// a watcher logs through its tracker's). Default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return only("WithLogger", func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger(nil)", ErrInvalidOption)
		}
		o.tracker.logger = l
		return nil
	}, forTracker)
}

// KeepHistory keeps the last n events (allocations, frees, GC-found leaks
// and noted events) in a bounded ring (New), 1 <= n <= MaxHistoryEvents. It
// is off by default. Each of the tracker's 64 registry shards keeps n/64
// events (at least 16), written under the shard lock that recording already
// holds, so the history adds no lock and no allocation; when a shard's ring
// wraps, the overwritten events are counted as dropped, never silently
// lost. Tracker.History reads it.
func KeepHistory(n int) Option {
	return only("KeepHistory", func(o *options) error {
		if n <= 0 || n > MaxHistoryEvents {
			return fmt.Errorf("%w: KeepHistory(%d): want 1..%d events", ErrInvalidOption, n, MaxHistoryEvents)
		}
		o.tracker.historyEvents = n
		return nil
	}, forTracker)
}

// FramePointers decides whether stacks are captured by following frame
// pointers, with a cache of sites keyed by the walk (New; default true on
// amd64 and arm64, where it costs about a twentieth of runtime.Callers), or
// by runtime.Callers alone (false). Sites are the same either way. An
// operator can turn the walk off for the whole process without a rebuild
// with the environment variable TENSORLIFE_STACK=callers.
func FramePointers(on bool) Option {
	return only("FramePointers", func(o *options) error {
		o.tracker.framePointers = on
		return nil
	}, forTracker)
}

// MinEvery is the shortest window Every accepts: shorter windows would spend
// the process on sampling.
const MinEvery = 10 * time.Millisecond
