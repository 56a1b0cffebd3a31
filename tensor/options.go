package tensor

import (
	"errors"
	"fmt"
	"unicode"

	"github.com/tensorlife/tensorlife/internal/option"
)

// ErrInvalidOption means an option's value cannot be used.
var ErrInvalidOption = errors.New("tensor: invalid option")

// Option configures a constructor of this package (NewHostDevice). Options
// are validated there: an invalid value is an error matching
// ErrInvalidOption that names the option and its value. Option values are
// immutable and may be shared.
type Option interface {
	apply(*config) error
}

type config struct {
	name string
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// MaxDeviceName bounds DeviceName in bytes: the name is a metrics attribute
// and a column of every report.
const MaxDeviceName = 64

// DeviceName names a host device (NewHostDevice; default "host"): 1 to
// MaxDeviceName printable characters, no spaces. Reports, profiles,
// metrics and the books of what tensorlife holds split memory by device
// name: two host devices standing in for two GPUs need two ("host:0",
// "host:1").
func DeviceName(name string) Option {
	return optionFunc(func(c *config) error {
		if name == "" || len(name) > MaxDeviceName {
			return fmt.Errorf("DeviceName(%q): want 1..%d bytes", name, MaxDeviceName)
		}
		for _, r := range name {
			if !unicode.IsPrint(r) || unicode.IsSpace(r) {
				return fmt.Errorf("DeviceName(%q): want printable characters and no spaces", name)
			}
		}
		c.name = name
		return nil
	})
}

func applyOptions(c *config, opts []Option) error {
	return option.Apply(c, opts, Option.apply, ErrInvalidOption)
}
