package watch

import (
	"errors"
	"fmt"
	"time"

	"github.com/tensorlife/tensorlife/internal/option"
)

// ErrInvalidOption means an option's value cannot be used, or options that
// contradict each other were passed together.
var ErrInvalidOption = errors.New("watch: invalid option")

// Option configures a Watcher (New). Option values are immutable and may be
// shared.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// Defaults. With one window per request, a site whose outlived bytes grow on
// every request is flagged after 6 requests (MostOf defaults to three
// quarters of the windows).
const (
	DefaultWindows   = 8    // K: windows judged at once
	DefaultHistory   = 32   // windows remembered per site
	DefaultMinGrowth = 4096 // bytes a suspect must grow by
)

// Bounds of the options.
const (
	// MinEvery is the shortest window Every accepts: shorter windows would
	// spend the process on judging.
	MinEvery = 10 * time.Millisecond
	// maxHistory bounds History: 8 bytes a window a site, 8 MiB at 1024
	// windows and 1024 sites that changed.
	maxHistory = 1024
)

type config struct {
	ticks     int           // a window is this many Tick calls; 0 if timed
	interval  time.Duration // a window is this long; 0 if counted
	windows   int
	history   int
	mostOf    int
	warmUp    uint64 // windows that only set the baseline
	minGrowth int64
	onSuspect func(Suspect)
}

func defaultConfig() config {
	return config{windows: DefaultWindows, history: DefaultHistory, minGrowth: DefaultMinGrowth}
}

// apply applies opts, then fills the defaults that depend on other options
// and checks the options against each other.
func (c *config) apply(opts []Option) error {
	if err := option.Apply(c, opts, Option.apply, ErrInvalidOption); err != nil {
		return err
	}
	if c.ticks > 0 && c.interval > 0 {
		return fmt.Errorf("%w: EveryTicks and Every both given: a window is counted or timed", ErrInvalidOption)
	}
	if c.ticks == 0 && c.interval == 0 {
		c.ticks = 1
	}
	if c.windows > c.history {
		return fmt.Errorf("%w: Windows(%d) exceeds the %d windows of History kept", ErrInvalidOption, c.windows, c.history)
	}
	if c.mostOf == 0 {
		c.mostOf = (3*c.windows + 3) / 4
	}
	if c.mostOf > c.windows {
		return fmt.Errorf("%w: MostOf(%d) exceeds Windows(%d)", ErrInvalidOption, c.mostOf, c.windows)
	}
	return nil
}

// EveryTicks ends a window every n calls of Watcher.Tick (default 1): with
// one Tick per request, windows are requests and tests are deterministic.
func EveryTicks(n int) Option {
	return optionFunc(option.AtLeast("EveryTicks", n, 1, func(c *config, n int) { c.ticks = n }))
}

// Every ends a window every d (at least MinEvery), on the goroutine of Run or
// Start. It excludes EveryTicks.
func Every(d time.Duration) Option {
	return optionFunc(option.AtLeast("Every", d, MinEvery, func(c *config, d time.Duration) { c.interval = d }))
}

// Windows sets K, how many of the latest windows are judged together
// (default DefaultWindows); at most History.
func Windows(k int) Option {
	return optionFunc(option.AtLeast("Windows", k, 1, func(c *config, k int) { c.windows = k }))
}

// History sets how many windows the watcher remembers per site (default
// DefaultHistory, at most 1024): what a site gave back over them is what its
// growth must beat, and a slow leak is judged over as many. Each site the
// watcher has seen change costs 8 B a window (8 KiB at the bound).
func History(h int) Option {
	return optionFunc(option.Within("History", h, 1, maxHistory, func(c *config, h int) { c.history = h }))
}

// MostOf sets in how many of the last K windows a site's outlived bytes must
// have grown (default three quarters of K, rounded up); at most K.
func MostOf(m int) Option {
	return optionFunc(option.AtLeast("MostOf", m, 1, func(c *config, m int) { c.mostOf = m }))
}

// MinGrowth sets how many bytes a site's outlived bytes must have grown by,
// strictly more than this, to be flagged by either rule (default
// DefaultMinGrowth).
func MinGrowth(bytes int64) Option {
	return optionFunc(option.AtLeast("MinGrowth", bytes, 0, func(c *config, b int64) { c.minGrowth = b }))
}

// WarmUp makes the first n windows set the baseline without judging: what a
// starting service keeps on purpose (weights, a cache filling up) is not
// growth to judge.
func WarmUp(n int) Option {
	return optionFunc(option.AtLeast("WarmUp", n, 0, func(c *config, n int) { c.warmUp = uint64(n) }))
}

// OnSuspect sets the function called once each time a site becomes a leak
// suspect. It runs on the goroutine that ended the window (a Tick caller or
// the loop of Run or Start), after the watcher's lock is released; it must
// not block. It runs under recover: a panic is logged through the
// tracker's logger (track.Logger) and counted (Watcher.CallbackPanics), and
// the watcher goes on. The default logs a warning through that logger.
func OnSuspect(f func(Suspect)) Option {
	return optionFunc(option.NotNil("OnSuspect", f, func(c *config, f func(Suspect)) { c.onSuspect = f }))
}
