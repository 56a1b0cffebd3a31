package oomdump

import (
	"errors"
	"time"

	"github.com/tensorlife/tensorlife/internal/option"
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
}

// Interval sets the least time from the start of one dump to the next:
// an out-of-memory error heard sooner is counted (Stats.Skipped) and
// written nowhere. 0 dumps every error heard while no dump is being
// written. d >= 0; default DefaultInterval.
func Interval(d time.Duration) Option {
	return optionFunc(option.AtLeast("Interval", d, 0, func(c *config, d time.Duration) { c.interval = d }))
}

// OnDump calls f after each dump, on the dumper's goroutine, with the files
// it wrote and the error that stopped it if any: where a service logs
// "out-of-memory dump written to ...". Close and Wait wait for f to return.
// A panic in f is recovered, counted (Stats.Panics) and logged through the
// tracker's logger (track.Logger), as are the panics of the user's code a
// dump reads (the sources' figures); the dump is recorded all the same and
// the next one calls f again.
func OnDump(f func(Dump)) Option {
	return optionFunc(option.NotNil("OnDump", f, func(c *config, f func(Dump)) { c.onDump = f }))
}
