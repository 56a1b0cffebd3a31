package track

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/tensorlife/tensorlife/internal/invariants"
)

// Option configures New. Options are immutable and may be shared.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// applyOptions applies opts onto c.
func applyOptions(c *config, opts []Option) error {
	if err := invariants.ApplyOptions(c, opts, Option.apply, ErrInvalidOption); err != nil {
		return err
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
	helpers       *helperRules     // HelperFunctions; nil if none
	clock         func() time.Time // Clock; nil reads time.Now
	kindKeys      []string         // RequestKinds; nil keeps no statistics
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

// Clock sets the tracker's clock (default time.Now), which must not go back:
// a test passes its own to age tensors without waiting.
func Clock(now func() time.Time) Option {
	return optionFunc(func(c *config) error {
		if now == nil {
			return fmt.Errorf("%w: Clock(nil)", ErrInvalidOption)
		}
		c.clock = now
		return nil
	})
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

// MaxSites bounds the stack table at n stacks, 1..1<<24 (default 4096), at
// about 48 B each, allocated by New; further stacks count as overflow.
func MaxSites(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > maxSitesLimit {
			return fmt.Errorf("%w: MaxSites(%d): want 1..%d", ErrInvalidOption, n, maxSitesLimit)
		}
		c.maxSites = n
		return nil
	})
}

// OnLeak sets what reports a dropped handle; it runs under recover, on the
// cleanup goroutine, and must not block.
func OnLeak(f func(LeakReport)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: OnLeak(nil)", ErrInvalidOption)
		}
		c.onLeak = f
		return nil
	})
}

// ReclaimLeaks frees a leaked tensor once reported (default true).
func ReclaimLeaks(reclaim bool) Option {
	return optionFunc(func(c *config) error {
		c.reclaimLeaks = reclaim
		return nil
	})
}

// Logger sets the logger of the default leak report and of the panics
// recovered from parts (NotePanic); default slog.Default().
func Logger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: Logger(nil)", ErrInvalidOption)
		}
		c.logger = l
		return nil
	})
}

// KeepHistory keeps the last n events, 1..1<<22, at about 80 B each,
// allocated by New (Tracker.History); older ones are counted as dropped.
func KeepHistory(n int) Option {
	return optionFunc(func(c *config) error {
		if n <= 0 || n > maxHistoryEvents {
			return fmt.Errorf("%w: KeepHistory(%d): want 1..%d events", ErrInvalidOption, n, maxHistoryEvents)
		}
		c.historyEvents = n
		return nil
	})
}

// FramePointers chooses the frame-pointer walk (default, about a twentieth
// of runtime.Callers; TENSORLIFE_STACK=callers turns it off) or Callers alone.
func FramePointers(on bool) Option {
	return optionFunc(func(c *config) error {
		c.framePointers = on
		return nil
	})
}
