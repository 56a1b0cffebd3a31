package pool

import (
	"errors"
	"fmt"
	"math"

	"github.com/tensorlife/tensorlife/internal/option"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// ErrInvalidOption means an option's value cannot be used, or the option
// conflicts with another one passed to New (Budget with BudgetFraction,
// Tracker with Untracked), or a budget exceeds the device.
var ErrInvalidOption = errors.New("pool: invalid option")

// Option configures a Pool in New. Options are validated together in New; an
// invalid one makes New return an error matching ErrInvalidOption.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// defaultTopSites is how many live sites an out-of-memory report names.
const defaultTopSites = 5

// maxTopSites bounds TopSites as report.TopSites is bounded: a longer list
// is no longer read.
const maxTopSites = 100

type config struct {
	tracker        *track.Tracker
	trackerSet     bool
	untracked      bool
	maxCached      int64 // < 0: no cap
	budget         int64 // 0: none
	budgetFraction float64
	topSites       int
	onOOM          func(*tensor.OOMError)
}

func defaultConfig() config {
	return config{maxCached: -1, topSites: defaultTopSites}
}

// Tracker records every tensor made from the pool in t (default
// track.Default()). Its live sites are what out-of-memory errors and Close
// name.
func Tracker(t *track.Tracker) Option {
	return optionFunc(func(c *config) error {
		if t == nil {
			return fmt.Errorf("Tracker(nil): %w; use Untracked", track.ErrNilTracker)
		}
		c.tracker, c.trackerSet = t, true
		return nil
	})
}

// Untracked leaves tensors made from the pool untracked: Tracker
// returns nil, tensor.New skips the stack capture and registry, and
// out-of-memory errors name no sites. It is for hot paths that are measured
// and trusted; leaks from it are invisible.
func Untracked() Option {
	return optionFunc(option.Set(true, func(c *config, on bool) { c.untracked = on }))
}

// MaxCachedBytes caps the bytes the pool keeps in free blocks for reuse. A
// block released when the cache holds n bytes or more goes back to the
// device. 0 caches nothing; without the option the cache is bounded only by
// the budget and the device (an allocation that does not fit releases the
// cache first).
func MaxCachedBytes(n int64) Option {
	return optionFunc(option.AtLeast("MaxCachedBytes", n, 0, func(c *config, n int64) { c.maxCached = n }))
}

// Budget caps the bytes the pool may hold from the device (reserved: active
// and cached blocks, after rounding) at bytes, which must be positive and at
// most the device's total memory. The cap is checked before the device is
// asked.
func Budget(bytes int64) Option {
	return optionFunc(option.AtLeast("Budget", bytes, 1, func(c *config, n int64) { c.budget = n }))
}

// BudgetFraction caps the pool's reserved bytes at f of the device's total
// memory, as MemInfo reports it when New runs; f must be in (0, 1].
func BudgetFraction(f float64) Option {
	return optionFunc(func(c *config) error {
		if math.IsNaN(f) || f <= 0 || f > 1 {
			return fmt.Errorf("BudgetFraction(%v): want 0 < f <= 1", f)
		}
		c.budgetFraction = f
		return nil
	})
}

// TopSites sets how many live call sites an out-of-memory error names
// (default 5; 0 names none; at most 100).
func TopSites(n int) Option {
	return optionFunc(option.Within("TopSites", n, 0, maxTopSites, func(c *config, n int) { c.topSites = n }))
}

// OnOutOfMemory calls f with every *tensor.OOMError the pool returns,
// before Allocate returns it: the hook for what must happen on an
// out-of-memory error wherever it is handled, such as writing a dump
// (package oomdump). f runs on the goroutine whose allocation failed, with
// no lock of the pool held, so it may read the pool and its tracker; that
// allocation waits for it, so f must return quickly and hand slow work to
// a goroutine of its own. f must not change the error, which the caller
// receives too. f must not be nil. A panic in f is recovered, counted
// (Stats.CallbackPanics) and logged through the tracker's logger
// (track.Logger; slog.Default() for an untracked pool): the allocation
// still returns its error, and the process lives on.
func OnOutOfMemory(f func(*tensor.OOMError)) Option {
	return optionFunc(option.NotNil("OnOutOfMemory", f, func(c *config, f func(*tensor.OOMError)) { c.onOOM = f }))
}

// resolve checks the options against each other and against the device's
// total memory (0 if unknown), and returns the budget in bytes.
func (c *config) resolve(total int64, memErr error) (int64, error) {
	if c.untracked && c.trackerSet {
		return 0, fmt.Errorf("%w: Tracker and Untracked together", ErrInvalidOption)
	}
	if !c.untracked && !c.trackerSet {
		c.tracker = track.Default()
	}
	if c.budget > 0 && c.budgetFraction > 0 {
		return 0, fmt.Errorf("%w: Budget and BudgetFraction together", ErrInvalidOption)
	}
	if (c.budget > 0 || c.budgetFraction > 0) && memErr != nil {
		return 0, fmt.Errorf("%w: a budget needs the device's total memory: %w", ErrInvalidOption, memErr)
	}
	switch {
	case c.budgetFraction > 0:
		b := int64(c.budgetFraction * float64(total))
		if b <= 0 {
			return 0, fmt.Errorf("%w: BudgetFraction(%v) of %d bytes is no memory", ErrInvalidOption, c.budgetFraction, total)
		}
		return min(b, total), nil
	case c.budget > total:
		return 0, fmt.Errorf("%w: Budget(%d) exceeds the device's %d bytes", ErrInvalidOption, c.budget, total)
	}
	return c.budget, nil
}
