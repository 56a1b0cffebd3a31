package cuda

import (
	"fmt"

	"github.com/tensorlife/tensorlife/tensor"
)

// Option configures Open.
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
// be positive.
//
// The cap is on raw device memory. To budget memory for tensors, including
// memory a pool caches, set the pool's limit instead.
func WithMemoryLimit(bytes int64) Option {
	return optionFunc(func(c *config) error {
		if bytes <= 0 {
			return fmt.Errorf("cuda: WithMemoryLimit(%d): %w", bytes, tensor.ErrInvalidSize)
		}
		c.memoryLimit = bytes
		return nil
	})
}

// newConfig applies opts in order; a later option overrides an earlier one.
func newConfig(opts []Option) (config, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}
