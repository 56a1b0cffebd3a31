package mask

import (
	"fmt"
	"log/slog"

	"github.com/tensorlife/tensorlife/tensor"
)

// Option configures a Builder (NewBuilder) or a Cache (NewCache). Options
// are validated where they are passed: a value that cannot be used, or an
// option meant for the other constructor, is an error matching
// ErrInvalidOption.
type Option interface {
	apply(*config) error
}

// target says which constructor is applying options.
type target uint8

const (
	forBuilder target = iota + 1
	forCache
)

func (t target) String() string {
	if t == forCache {
		return "NewCache"
	}
	return "NewBuilder"
}

type config struct {
	target target

	// Builder.
	dtype     tensor.DType
	maxLength int
	detect    bool
	strict    bool
	remember  int
	onRebuild func(Rebuild)
	logger    *slog.Logger

	// Cache.
	name       string
	maxBytes   int64
	maxEntries int
}

// Defaults. A Cache's budget is explicit in most services; the default
// keeps a forgotten one from growing without bound.
const (
	// DefaultCacheBytes is a Cache's byte budget without MaxBytes.
	DefaultCacheBytes = 64 << 20
	// DefaultCacheEntries is a Cache's entry bound without MaxEntries.
	DefaultCacheEntries = 1024
	// DefaultRememberRequests is how many (call site, request) pairs a
	// Builder remembers to detect rebuilt masks, without RememberRequests.
	DefaultRememberRequests = 4096
)

func defaultConfig(t target) config {
	return config{
		target:     t,
		dtype:      tensor.Bool,
		detect:     true,
		remember:   DefaultRememberRequests,
		logger:     slog.Default(),
		name:       "mask",
		maxBytes:   DefaultCacheBytes,
		maxEntries: DefaultCacheEntries,
	}
}

func newConfig(t target, opts []Option) (config, error) {
	cfg := defaultConfig(t)
	for _, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o.apply(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

type option struct {
	name string
	only target // 0: valid for both
	fn   func(*config) error
}

func (o option) apply(c *config) error {
	if o.only != 0 && o.only != c.target {
		return fmt.Errorf("%w: %s is an option of %s, passed to %s", ErrInvalidOption, o.name, o.only, c.target)
	}
	if err := o.fn(c); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidOption, o.name, err)
	}
	return nil
}

// WithDType sets the element type of the masks a Builder makes (default
// tensor.Bool). tensor.Bool and tensor.Uint8 hold 1 where attention is
// allowed and 0 where it is masked; tensor.Float32, tensor.Float16 and
// tensor.BFloat16 are additive masks, added to attention scores before the
// softmax: 0 where allowed and MaskedBias where masked (see MaskedBias for
// float16).
func WithDType(dt tensor.DType) Option {
	return option{name: "WithDType", only: forBuilder, fn: func(c *config) error {
		if _, err := encodingOf(dt); err != nil {
			return err
		}
		c.dtype = dt
		return nil
	}}
}

// MaxLength bounds how many tokens a Growable from this Builder may hold:
// the model's context window. Growth never allocates past it, and an Append
// past it returns an error matching ErrCapacity. Zero, the default, means
// no bound but overflow.
func MaxLength(tokens int) Option {
	return option{name: "MaxLength", only: forBuilder, fn: func(c *config) error {
		if tokens < 0 {
			return fmt.Errorf("negative length %d", tokens)
		}
		c.maxLength = tokens
		return nil
	}}
}

// DetectRebuilds turns rebuild detection on (the default) or off. See
// Builder for what counts as a rebuild.
func DetectRebuilds(on bool) Option {
	return option{name: "DetectRebuilds", only: forBuilder, fn: func(c *config) error {
		c.detect = on
		return nil
	}}
}

// Strict turns a detected rebuild into an error: the builder frees the mask
// it just made and returns a *RebuildError matching ErrMaskRebuilt. The
// error is the report: the default log warning is not written (OnRebuild
// is still called). Use it in tests and staging, where a rebuilt mask
// should fail loudly.
func Strict(on bool) Option {
	return option{name: "Strict", only: forBuilder, fn: func(c *config) error {
		c.strict = on
		return nil
	}}
}

// RememberRequests bounds the memory of rebuild detection: the Builder
// remembers the n (call site, request labels) pairs that built masks most
// recently (default DefaultRememberRequests) and forgets the least recently
// used beyond that. Detection state keyed by request must be bounded, or it
// would itself grow with every request served.
func RememberRequests(n int) Option {
	return option{name: "RememberRequests", only: forBuilder, fn: func(c *config) error {
		if n < 1 || n > 1<<20 {
			return fmt.Errorf("%d pairs: want 1..%d", n, 1<<20)
		}
		c.remember = n
		return nil
	}}
}

// OnRebuild sets the function told of every detected rebuild, in place of
// the default log warning. It runs on the goroutine that built the mask,
// with no lock held, before the builder returns; it must not block.
func OnRebuild(f func(Rebuild)) Option {
	return option{name: "OnRebuild", only: forBuilder, fn: func(c *config) error {
		if f == nil {
			return fmt.Errorf("nil function")
		}
		c.onRebuild = f
		return nil
	}}
}

// WithLogger sets the logger of the default rebuild report (default
// slog.Default()). It makes no sense together with OnRebuild, which
// replaces that report, but is harmless.
func WithLogger(l *slog.Logger) Option {
	return option{name: "WithLogger", only: forBuilder, fn: func(c *config) error {
		if l == nil {
			return fmt.Errorf("nil logger")
		}
		c.logger = l
		return nil
	}}
}

// MaxBytes sets a Cache's byte budget: the sum of its entries' Bytes never
// exceeds it (default DefaultCacheBytes). Zero is valid and caches nothing.
func MaxBytes(n int64) Option {
	return option{name: "MaxBytes", only: forCache, fn: func(c *config) error {
		if n < 0 {
			return fmt.Errorf("negative budget %d", n)
		}
		c.maxBytes = n
		return nil
	}}
}

// MaxEntries sets how many masks a Cache holds at most (default
// DefaultCacheEntries). Zero is valid and caches nothing.
func MaxEntries(n int) Option {
	return option{name: "MaxEntries", only: forCache, fn: func(c *config) error {
		if n < 0 {
			return fmt.Errorf("negative entry count %d", n)
		}
		c.maxEntries = n
		return nil
	}}
}

// CacheName names a Cache in its CacheStats, which metrics use as an
// attribute (default "mask"); keep it low-cardinality.
func CacheName(name string) Option {
	return option{name: "CacheName", only: forCache, fn: func(c *config) error {
		if name == "" {
			return fmt.Errorf("empty name")
		}
		c.name = name
		return nil
	}}
}
