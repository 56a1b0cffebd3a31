package option_test

import (
	"errors"
	"fmt"

	"github.com/tensorlife/tensorlife/internal/option"
)

// ErrInvalidOption is the example package's sentinel.
var ErrInvalidOption = errors.New("cache: invalid option")

type cacheConfig struct{ entries int }

// Option configures a cache: sealed by its unexported method.
type Option interface{ apply(*cacheConfig) error }

type optionFunc func(*cacheConfig) error

func (f optionFunc) apply(c *cacheConfig) error { return f(c) }

// MaxEntries is an option as a package declares it.
func MaxEntries(n int) Option {
	return optionFunc(option.Within("MaxEntries", n, 1, 1<<20, func(c *cacheConfig, n int) { c.entries = n }))
}

func newCache(opts ...Option) (cacheConfig, error) {
	c := cacheConfig{entries: 64}
	err := option.Apply(&c, opts, Option.apply, ErrInvalidOption)
	return c, err
}

func Example() {
	c, err := newCache(MaxEntries(512))
	fmt.Println(c.entries, err)
	_, err = newCache(MaxEntries(0))
	fmt.Println(errors.Is(err, ErrInvalidOption), err)
	// Output:
	// 512 <nil>
	// true cache: invalid option: MaxEntries(0): want 1..1048576
}
