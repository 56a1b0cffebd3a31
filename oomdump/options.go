package oomdump

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Errors returned by New.
var (
	// ErrInvalidOption means an option's value cannot be used, a nil
	// option was passed, or the directory is empty.
	ErrInvalidOption = errors.New("oomdump: invalid option")
	// ErrPanicked is the Dump.Err of a dump stopped by a panic: one
	// recovered from the user's code it calls (the figures of the
	// tracker's parts).
	ErrPanicked = errors.New("oomdump: recovered panic")
)

// DefaultInterval is the least time between two dumps unless Interval
// says otherwise: long enough that an OOM storm writes one dump, short
// enough that the next distinct failure gets its own.
const DefaultInterval = time.Minute

// Option configures New.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	interval time.Duration
	onDump   func(Dump)
	logger   *slog.Logger
}

// Interval sets the least time from the start of one dump to the next:
// an out-of-memory error heard sooner is counted (Stats.Skipped) and
// written nowhere. 0 dumps every error heard while no dump is being
// written. d >= 0; default DefaultInterval.
func Interval(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: Interval(%v): want d >= 0", ErrInvalidOption, d)
		}
		c.interval = d
		return nil
	})
}

// OnDump calls f after each dump, on the dumper's goroutine, with the files
// it wrote and the error that stopped it if any: where a service logs
// "out-of-memory dump written to ...". Close and Wait wait for f to return.
// A panic in f is recovered, counted (Stats.Panics) and logged (Logger);
// the dump is recorded all the same and the next one calls f again.
func OnDump(f func(Dump)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: OnDump(nil)", ErrInvalidOption)
		}
		c.onDump = f
		return nil
	})
}

// Logger sets where the Dumper reports what no caller is there to hear: a
// panic recovered from OnDump or from the user's code a dump reads (the
// sources' figures). Default slog.Default(); l must not be nil.
func Logger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: Logger(nil)", ErrInvalidOption)
		}
		c.logger = l
		return nil
	})
}
