package benchratio

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/option"
)

// Option changes how Run measures. Options are validated when Run starts;
// an invalid one fails the benchmark with an error matching
// ErrInvalidOption.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	roundOps     int
	baselineName string
}

// MaxRoundOps bounds RoundOps: a round much longer than a scheduler tick
// is as exposed to interference as two separate benchmarks.
const MaxRoundOps = 1_000_000

// RoundOps sets the operations per round on each side, 1..MaxRoundOps
// (default 200). Rounds should last microseconds: long enough that reading
// the clock twice is noise, short enough that interference rarely spans
// both sides of one round.
func RoundOps(n int) Option {
	return optionFunc(option.Within("RoundOps", n, 1, MaxRoundOps, func(c *config, n int) { c.roundOps = n }))
}

// BaselineName names the baseline in the metrics Run reports (default
// "baseline"): a non-empty name without white space, other than the
// measured one.
func BaselineName(name string) Option {
	return optionFunc(func(c *config) error {
		if !validUnit(name) {
			return fmt.Errorf("BaselineName(%q): want a non-empty name without white space", name)
		}
		c.baselineName = name
		return nil
	})
}

// newConfig checks Run's arguments and applies opts.
func newConfig(name string, measured, baseline func(), opts []Option) (config, error) {
	c := config{roundOps: 200, baselineName: "baseline"}
	if !validUnit(name) {
		return c, fmt.Errorf("benchratio: name %q: want a non-empty name without white space", name)
	}
	if measured == nil || baseline == nil {
		return c, fmt.Errorf("benchratio: %s: nil function", name)
	}
	if err := option.Apply(&c, opts, Option.apply, ErrInvalidOption); err != nil {
		return c, err
	}
	if c.baselineName == name {
		return c, fmt.Errorf("%w: BaselineName(%q): the measured function has that name", ErrInvalidOption, name)
	}
	return c, nil
}
