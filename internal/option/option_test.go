package option_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/option"
)

var errInvalid = errors.New("pkg: invalid option")

type config struct {
	n     int
	d     time.Duration
	name  string
	f     func()
	on    bool
	order []string
}

type opt interface{ apply(*config) error }

type optFunc func(*config) error

func (f optFunc) apply(c *config) error { return f(c) }

func apply(opts ...opt) (config, error) {
	var c config
	err := option.Apply(&c, opts, opt.apply, errInvalid)
	return c, err
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  opt
		want string // "" for valid
	}{
		{"set", optFunc(option.Set(true, func(c *config, on bool) { c.on = on })), ""},
		{"within", optFunc(option.Within("N", 3, 1, 3, func(c *config, n int) { c.n = n })), ""},
		{"below", optFunc(option.Within("N", 0, 1, 3, func(c *config, n int) { c.n = n })), "pkg: invalid option: N(0): want 1..3"},
		{"above", optFunc(option.Within("N", 4, 1, 3, func(c *config, n int) { c.n = n })), "pkg: invalid option: N(4): want 1..3"},
		{"at least", optFunc(option.AtLeast("D", time.Second, 0, func(c *config, d time.Duration) { c.d = d })), ""},
		{"negative", optFunc(option.AtLeast("D", -time.Second, 0, func(c *config, d time.Duration) { c.d = d })), "pkg: invalid option: D(-1s): want at least 0s"},
		{"name", optFunc(option.NotEmpty("Name", "a name", "x", func(c *config, s string) { c.name = s })), ""},
		{"empty", optFunc(option.NotEmpty("Name", "a name", "", func(c *config, s string) { c.name = s })), `pkg: invalid option: Name(""): want a name`},
		{"func", optFunc(option.NotNil("F", func() {}, func(c *config, f func()) { c.f = f })), ""},
		{"nil func", optFunc(option.NotNil("F", (func())(nil), func(c *config, f func()) { c.f = f })), "pkg: invalid option: F(nil)"},
		{"nil option", nil, "pkg: invalid option: nil option"},
		{"typed nil option", optFunc(nil), "pkg: invalid option: nil option"},
		{"own error", optFunc(func(*config) error { return errors.New("A and B together") }), "pkg: invalid option: A and B together"},
		{"already invalid", optFunc(func(*config) error { return fmt.Errorf("%w: said so", errInvalid) }), "pkg: invalid option: said so"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := apply(tc.opt)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, errInvalid)
			assert.EqualError(t, err, tc.want)
		})
	}
}

// Options apply in order, the last of two settings winning, and the first
// refused one stops the rest.
func TestApplyInOrder(t *testing.T) {
	step := func(s string) opt {
		return optFunc(func(c *config) error { c.order = append(c.order, s); return nil })
	}
	c, err := apply(step("a"), optFunc(option.Within("N", 2, 1, 3, func(c *config, n int) { c.n = n })),
		step("b"), optFunc(option.Within("N", 3, 1, 3, func(c *config, n int) { c.n = n })))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, c.order)
	assert.Equal(t, 3, c.n)
	c, err = apply(step("a"), optFunc(option.Within("N", 9, 1, 3, func(c *config, n int) { c.n = n })), step("b"))
	assert.ErrorIs(t, err, errInvalid)
	assert.Equal(t, []string{"a"}, c.order)
}
