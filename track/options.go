package track

import (
	"errors"
	"fmt"
	"log/slog"
)

// ErrInvalidOption means an option's value cannot be used, or the option
// makes no sense where it was passed.
var ErrInvalidOption = errors.New("track: invalid option")

// Option configures a Tracker in New.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	name          string
	maxSites      int
	onLeak        func(LeakReport)
	reclaimLeaks  bool
	logger        *slog.Logger
	historyEvents int
}

func defaultConfig() config {
	return config{
		name:         "tensorlife",
		maxSites:     4096,
		reclaimLeaks: true,
		logger:       slog.Default(),
	}
}

// WithName names the tracker in logs and reports.
func WithName(name string) Option {
	return optionFunc(func(c *config) error {
		if name == "" {
			return fmt.Errorf("%w: empty tracker name", ErrInvalidOption)
		}
		c.name = name
		return nil
	})
}

// MaxSites bounds the stack table: at most n distinct call stacks are kept
// (default 4096). Allocations from further stacks are counted under the
// overflow site, which reports show as OverflowFunction.
func MaxSites(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > 1<<24 {
			return fmt.Errorf("%w: MaxSites(%d): want 1..%d", ErrInvalidOption, n, 1<<24)
		}
		c.maxSites = n
		return nil
	})
}

// OnLeak sets the function called when the garbage collector finds a tensor
// that was never freed. It runs on the runtime's cleanup goroutine: it must
// return quickly and must not block. The default logs a warning through
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
// found leaked is returned to its allocator after the leak is reported. The
// default, true, keeps a leaking service alive while the leak is reported;
// false keeps the leaked tensor in the live set so profiles show it.
func ReclaimLeaks(reclaim bool) Option {
	return optionFunc(func(c *config) error {
		c.reclaimLeaks = reclaim
		return nil
	})
}

// WithLogger sets the logger for the default leak report (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger(nil)", ErrInvalidOption)
		}
		c.logger = l
		return nil
	})
}
