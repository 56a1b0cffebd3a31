package cuda

import (
	"errors"

	"github.com/tensorlife/tensorlife/internal/option"
)

// ErrInvalidOption means an option's value cannot be used; nil options are
// refused the same way.
var ErrInvalidOption = errors.New("cuda: invalid option")

// Option configures Open. Options are validated before the driver is
// touched; an invalid one is an error matching ErrInvalidOption.
type Option interface {
	apply(*config) error
}

type config struct {
	memoryLimit int64 // 0: none
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithMemoryLimit caps the bytes this Device may hold allocated at once.
// An Alloc past the cap fails with an error matching tensor.ErrOutOfMemory
// without reaching the driver, and MemInfo reports the cap as the total (or
// the device's memory, if smaller) and what is left of it as free (or the
// device's free memory, if smaller). Use it to share one GPU between
// processes, or to make out-of-memory cheap to reach in tests. bytes must
// be positive (no upper bound: a cap above the device's memory is the
// device's memory).
//
// The cap is on raw device memory. To budget memory for tensors, including
// memory a pool caches, set the pool's limit instead.
func WithMemoryLimit(bytes int64) Option {
	return optionFunc(option.AtLeast("WithMemoryLimit", bytes, 1, func(c *config, n int64) { c.memoryLimit = n }))
}

// newConfig applies opts in order; a later option overrides an earlier one.
func newConfig(opts []Option) (config, error) {
	var c config
	if err := option.Apply(&c, opts, Option.apply, ErrInvalidOption); err != nil {
		return config{}, err
	}
	return c, nil
}
