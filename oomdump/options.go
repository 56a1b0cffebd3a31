package oomdump

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by New.
var (
	// ErrInvalidOption means an option's value cannot be used, a nil
	// option was passed, or the directory is empty.
	ErrInvalidOption = errors.New("oomdump: invalid option")
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
func OnDump(f func(Dump)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: OnDump(nil)", ErrInvalidOption)
		}
		c.onDump = f
		return nil
	})
}
