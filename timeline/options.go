package timeline

import (
	"errors"
	"fmt"

	"github.com/tensorlife/tensorlife/internal/option"
)

// Errors returned by this package. Every error it returns matches one of
// these, track.ErrNilTracker or track.ErrHistoryOff with errors.Is, or wraps an I/O error from the
// writer or the file system.
var (
	// ErrInvalidOption means an option's value cannot be used.
	ErrInvalidOption = errors.New("timeline: invalid option")
	// ErrNilHistory means FromHistory was given a nil *track.HistoryLog.
	ErrNilHistory = errors.New("timeline: nil history")
	// ErrLiveNeeded means FromHistory was given a history that dropped
	// events but no live site totals to rebuild the series from: without
	// them the bytes held before the oldest kept event are unknown.
	ErrLiveNeeded = errors.New("timeline: history dropped events; live site totals are needed")
	// ErrEmptyPath means a file writer was given an empty path.
	ErrEmptyPath = errors.New("timeline: empty path")
)

// Defaults of the options.
const (
	DefaultBands   = 8
	DefaultSamples = 1000
	// MaxBands bounds Bands: a legend of more bands than this is no longer
	// readable.
	MaxBands = 24
	// MaxSamples bounds Samples: at each sample the trace writes one counter
	// event and the picture two path commands per series.
	MaxSamples = 1 << 22
	// MaxTitle bounds the length of a Title in bytes.
	MaxTitle = 200
)

// Option configures Build and FromHistory. Options are validated there: an
// invalid value is an error matching ErrInvalidOption. Option values are
// immutable and may be shared between goroutines.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	bands      int
	samples    int
	budgetLine int64
	reserved   int64
	title      string
}

func newConfig(opts []Option) (config, error) {
	c := config{bands: DefaultBands, samples: DefaultSamples}
	if err := option.Apply(&c, opts, Option.apply, ErrInvalidOption); err != nil {
		return c, err
	}
	return c, nil
}

// Bands sets how many sites get a band of their own in the picture and a
// series in the trace (default 8, at most MaxBands, 24); the live bytes of
// every other site are summed into one more band named "other". Sites are
// ranked by the most live bytes they held at once in the window.
func Bands(n int) Option {
	return optionFunc(option.Within("Bands", n, 1, MaxBands, func(c *config, n int) { c.bands = n }))
}

// Samples bounds the number of sample points (default 1000). When the
// window holds fewer distinct event times than that, the series are sampled
// after every event and are exact; otherwise they are sampled at n evenly
// spaced instants, each the exact live bytes at that instant, so a spike
// between two instants may not show. The picture and the trace's counters
// both use these samples; the trace lists every event regardless.
func Samples(n int) Option {
	return optionFunc(option.Within("Samples", n, 2, MaxSamples, func(c *config, n int) { c.samples = n }))
}

// BudgetLine draws a memory limit of bytes (a pool's budget or the device's
// capacity) as a dashed line in the picture and a counter in the trace. It
// only draws: it limits nothing (pool.Budget is what caps memory). Any
// positive number of bytes.
func BudgetLine(bytes int64) Option {
	return optionFunc(option.AtLeast("BudgetLine", bytes, 1, func(c *config, n int64) { c.budgetLine = n }))
}

// Reserved gives what the allocator held from the device at the window's
// end (a pool's Stats().Reserved, an OOMError's Reserved): the picture
// draws it beside the tensor bytes at the end, so that the distance from
// the bands to the budget line, the allocator's rounding to its block
// sizes and its cached blocks, is on the chart. It only draws. Any
// positive number of bytes.
func Reserved(bytes int64) Option {
	return optionFunc(option.AtLeast("Reserved", bytes, 1, func(c *config, n int64) { c.reserved = n }))
}

// Title sets the picture's title and the trace's process name (default
// "Live memory by site" and the tracker's name).
func Title(title string) Option {
	return optionFunc(func(c *config) error {
		if title == "" || len(title) > MaxTitle {
			return fmt.Errorf("Title of %d bytes: want 1..%d", len(title), MaxTitle)
		}
		c.title = title
		return nil
	})
}
