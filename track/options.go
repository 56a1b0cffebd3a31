package track

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/tensorlife/tensorlife/internal/isnil"
)

// ErrInvalidOption means an option's value cannot be used, or the option
// contradicts another.
var ErrInvalidOption = errors.New("track: invalid option")

// Option configures a Tracker (New). An invalid value is an error matching
// ErrInvalidOption that names the option. Option values are immutable and
// may be shared.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// applyOptions applies opts onto c.
func applyOptions(c *config, opts []Option) error {
	for _, opt := range opts {
		if isnil.Value(opt) {
			return fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := opt.apply(c); err != nil {
			return err
		}
	}
	return nil
}

// Bounds of the tracker options.
const (
	// maxSitesLimit bounds MaxSites.
	maxSitesLimit = 1 << 24
	// maxHistoryEvents bounds KeepHistory: about 64 bytes an event, 256 MiB
	// at the bound.
	maxHistoryEvents = 1 << 22
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

// Name names the tracker in logs and reports.
func Name(name string) Option {
	return optionFunc(func(c *config) error {
		if name == "" {
			return fmt.Errorf("%w: Name(\"\"): want a name", ErrInvalidOption)
		}
		c.name = name
		return nil
	})
}

// MaxSites bounds the stack table (New): at most n distinct call stacks are
// kept, 1 <= n <= maxSitesLimit (default 4096). Allocations from further
// stacks are counted under the overflow site, which reports show as
// OverflowFunction.
func MaxSites(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > maxSitesLimit {
			return fmt.Errorf("%w: MaxSites(%d): want 1..%d", ErrInvalidOption, n, maxSitesLimit)
		}
		c.maxSites = n
		return nil
	})
}

// OnLeak sets the function called when the garbage collector finds a tensor
// that was never freed (New). It runs on the runtime's cleanup goroutine: it
// must return quickly and must not block. The default logs a warning through
// the tracker's logger.
func OnLeak(f func(LeakReport)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: OnLeak(nil)", ErrInvalidOption)
		}
		c.onLeak = f
		return nil
	})
}

// ReclaimLeaks decides whether the memory of a tensor the garbage collector
// found leaked is returned to its allocator after the leak is reported
// (New). The default, true, keeps a leaking service alive while the leak is
// reported; false keeps the leaked tensor in the live set so profiles and
// tests show it.
func ReclaimLeaks(reclaim bool) Option {
	return optionFunc(func(c *config) error {
		c.reclaimLeaks = reclaim
		return nil
	})
}

// Logger sets the logger of the default leak report (a watcher takes its
// own, watch.Logger). Default slog.Default().
func Logger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: Logger(nil)", ErrInvalidOption)
		}
		c.logger = l
		return nil
	})
}

// KeepHistory keeps the last n events (allocations, frees, GC-found leaks
// and noted events) in a bounded ring (New), 1 <= n <= maxHistoryEvents. It
// is off by default. Each of the tracker's 64 registry shards keeps n/64
// events (at least 16), written under the shard lock that recording already
// holds, so the history adds no lock and no allocation; when a shard's ring
// wraps, the overwritten events are counted as dropped, never silently
// lost. Tracker.History reads it.
func KeepHistory(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 || n > maxHistoryEvents {
			return fmt.Errorf("%w: KeepHistory(%d): want 1..%d events", ErrInvalidOption, n, maxHistoryEvents)
		}
		c.historyEvents = n
		return nil
	})
}

// FramePointers decides whether stacks are captured by following frame
// pointers, with a cache of sites keyed by the walk (New; default true on
// amd64 and arm64, where it costs about a twentieth of runtime.Callers), or
// by runtime.Callers alone (false). Sites are the same either way. An
// operator can turn the walk off for the whole process without a rebuild
// with the environment variable TENSORLIFE_STACK=callers.
func FramePointers(on bool) Option {
	return optionFunc(func(c *config) error {
		c.framePointers = on
		return nil
	})
}
