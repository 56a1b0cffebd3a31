// Package option is the one way tensorlife's packages declare and check
// their functional options.
//
// Each package keeps one sealed Option type per constructor family, so that
// an option given to the wrong constructor does not compile, and makes its
// options with a function type of its own (the method that seals the
// interface must be declared in the package):
//
//	type Option interface{ apply(*config) error }
//
//	type optionFunc func(*config) error
//
//	func (f optionFunc) apply(c *config) error { return f(c) }
//
// Each option is built from the checks here, which refuse a value alike in
// every package, and names itself in what it refuses:
//
//	func MaxSites(n int) Option {
//		return optionFunc(option.Within("MaxSites", n, 1, maxSitesLimit,
//			func(c *config, n int) { c.maxSites = n }))
//	}
//
// A check that is the package's own (two options that exclude each other,
// a value checked against the device) returns a plain error; Apply makes
// every error an option returns match the package's ErrInvalidOption.
package option

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/tensorlife/tensorlife/internal/invariants"
)

// Apply applies opts to c in order with apply (an option type's method
// expression, Option.apply), and stops at the first that fails. A nil
// option, or an interface holding a nil value, is an error matching
// invalid, the package's ErrInvalidOption; so is every error an option
// returns: one that does not match invalid already is wrapped as
// "invalid: err".
func Apply[O, C any](c *C, opts []O, apply func(O, *C) error, invalid error) error {
	for _, o := range opts {
		if invariants.IsNil(o) {
			return fmt.Errorf("%w: nil option", invalid)
		}
		if err := apply(o, c); err != nil {
			if errors.Is(err, invalid) {
				return err
			}
			return fmt.Errorf("%w: %w", invalid, err)
		}
	}
	return nil
}

// Set returns an option that sets v, whatever it is: a switch, a choice
// every value of which is valid.
func Set[C, V any](v V, set func(*C, V)) func(*C) error {
	return func(c *C) error {
		set(c, v)
		return nil
	}
}

// NotNil returns an option that sets v, refusing a nil one (a nil pointer,
// function, interface, map, slice or channel) as "name(nil)".
func NotNil[C, V any](name string, v V, set func(*C, V)) func(*C) error {
	return func(c *C) error {
		if invariants.IsNil(v) {
			return fmt.Errorf("%s(nil)", name)
		}
		set(c, v)
		return nil
	}
}

// NotEmpty returns an option that sets s, refusing "" as
// `name(""): want a name`; what names the value is the option's
// own word (a name, a kind, a key).
func NotEmpty[C any](name, what, s string, set func(*C, string)) func(*C) error {
	return func(c *C) error {
		if s == "" {
			return fmt.Errorf("%s(\"\"): want %s", name, what)
		}
		set(c, s)
		return nil
	}
}

// Within returns an option that sets n, refusing one outside lo..hi
// (both included) as "name(n): want lo..hi".
func Within[C any, N cmp.Ordered](name string, n, lo, hi N, set func(*C, N)) func(*C) error {
	return func(c *C) error {
		if n < lo || n > hi {
			return fmt.Errorf("%s(%v): want %v..%v", name, n, lo, hi)
		}
		set(c, n)
		return nil
	}
}

// AtLeast returns an option that sets n, refusing one below lo as
// "name(n): want at least lo".
func AtLeast[C any, N cmp.Ordered](name string, n, lo N, set func(*C, N)) func(*C) error {
	return func(c *C) error {
		if n < lo {
			return fmt.Errorf("%s(%v): want at least %v", name, n, lo)
		}
		set(c, n)
		return nil
	}
}
