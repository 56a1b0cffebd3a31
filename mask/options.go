package mask

import (
	"fmt"
	"log/slog"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// BuilderOption configures a Builder (NewBuilder), CacheOption a Cache
// (NewCache). They are two types so that an option given to the wrong
// constructor does not compile; a value that cannot be used is an error
// matching ErrInvalidOption, returned by the constructor.
type BuilderOption interface {
	applyBuilder(*builderConfig) error
}

// CacheOption configures a Cache (NewCache); see BuilderOption.
type CacheOption interface {
	applyCache(*cacheConfig) error
}

type builderConfig struct {
	dtype     tensor.DType
	maxLength int
	detect    bool
	strict    bool
	remember  int
	onRebuild func(Rebuild)
	logger    *slog.Logger
}

type cacheConfig struct {
	name       string
	maxBytes   int64
	maxEntries int
	tracker    *track.Tracker
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

func newBuilderConfig(opts []BuilderOption) (builderConfig, error) {
	cfg := builderConfig{
		dtype:    tensor.Bool,
		detect:   true,
		remember: DefaultRememberRequests,
		logger:   slog.Default(),
	}
	if err := invariants.ApplyOptions(&cfg, opts, BuilderOption.applyBuilder, ErrInvalidOption); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func newCacheConfig(opts []CacheOption) (cacheConfig, error) {
	cfg := cacheConfig{name: "mask", maxBytes: DefaultCacheBytes, maxEntries: DefaultCacheEntries}
	if err := invariants.ApplyOptions(&cfg, opts, CacheOption.applyCache, ErrInvalidOption); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// builderOption and cacheOption carry the option's name so that every
// refused value is reported as "mask: invalid option: Name: why".
type builderOption struct {
	name string
	fn   func(*builderConfig) error
}

func (o builderOption) applyBuilder(c *builderConfig) error {
	if err := o.fn(c); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidOption, o.name, err)
	}
	return nil
}

type cacheOption struct {
	name string
	fn   func(*cacheConfig) error
}

func (o cacheOption) applyCache(c *cacheConfig) error {
	if err := o.fn(c); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidOption, o.name, err)
	}
	return nil
}

// DType sets the element type of the masks a Builder makes (default
// tensor.Bool). tensor.Bool and tensor.Uint8 hold 1 where attention is
// allowed and 0 where it is masked; tensor.Float32, tensor.Float16 and
// tensor.BFloat16 are additive masks, added to attention scores before the
// softmax: 0 where allowed and MaskedBias where masked (see MaskedBias for
// float16).
func DType(dt tensor.DType) BuilderOption {
	return builderOption{name: "DType", fn: func(c *builderConfig) error {
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
func MaxLength(tokens int) BuilderOption {
	return builderOption{name: "MaxLength", fn: func(c *builderConfig) error {
		if tokens < 0 {
			return fmt.Errorf("negative length %d", tokens)
		}
		c.maxLength = tokens
		return nil
	}}
}

// DetectRebuilds turns rebuild detection on (the default) or off. See
// Builder for what counts as a rebuild.
func DetectRebuilds(on bool) BuilderOption {
	return builderOption{name: "DetectRebuilds", fn: func(c *builderConfig) error {
		c.detect = on
		return nil
	}}
}

// Strict turns a detected rebuild into an error: the builder frees the mask
// it just made and returns a *RebuildError matching ErrMaskRebuilt. The
// error is the report: the default log warning is not written (OnRebuild
// is still called). Use it in tests and staging, where a rebuilt mask
// should fail loudly.
func Strict(on bool) BuilderOption {
	return builderOption{name: "Strict", fn: func(c *builderConfig) error {
		c.strict = on
		return nil
	}}
}

// RememberRequests bounds the memory of rebuild detection: the Builder
// remembers the n (call site, request labels) pairs that built masks most
// recently (default DefaultRememberRequests) and forgets the least recently
// used beyond that. Detection state keyed by request must be bounded, or it
// would itself grow with every request served.
func RememberRequests(n int) BuilderOption {
	return builderOption{name: "RememberRequests", fn: func(c *builderConfig) error {
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
func OnRebuild(f func(Rebuild)) BuilderOption {
	return builderOption{name: "OnRebuild", fn: func(c *builderConfig) error {
		if f == nil {
			return fmt.Errorf("nil function")
		}
		c.onRebuild = f
		return nil
	}}
}

// Logger sets the logger of the default rebuild report (default
// slog.Default()). It makes no sense together with OnRebuild, which
// replaces that report, but is harmless.
func Logger(l *slog.Logger) BuilderOption {
	return builderOption{name: "Logger", fn: func(c *builderConfig) error {
		if l == nil {
			return fmt.Errorf("nil logger")
		}
		c.logger = l
		return nil
	}}
}

// MaxBytes sets a Cache's byte budget: what its entries cost together
// never exceeds it (default DefaultCacheBytes). An entry costs the device
// memory its mask holds, the length of its key and CacheEntryOverhead
// (see Cache). Zero is valid and caches nothing.
func MaxBytes(n int64) CacheOption {
	return cacheOption{name: "MaxBytes", fn: func(c *cacheConfig) error {
		if n < 0 {
			return fmt.Errorf("negative budget %d", n)
		}
		c.maxBytes = n
		return nil
	}}
}

// MaxEntries sets how many masks a Cache holds at most (default
// DefaultCacheEntries). Zero is valid and caches nothing.
func MaxEntries(n int) CacheOption {
	return cacheOption{name: "MaxEntries", fn: func(c *cacheConfig) error {
		if n < 0 {
			return fmt.Errorf("negative entry count %d", n)
		}
		c.maxEntries = n
		return nil
	}}
}

// CacheTracker attaches the Cache to t when it is made (track.Attach), so
// that t's summary and metrics list it before it keeps its first mask.
// Without it a Cache attaches to the tracker of the first mask it keeps.
func CacheTracker(t *track.Tracker) CacheOption {
	return cacheOption{name: "CacheTracker", fn: func(c *cacheConfig) error {
		if t == nil {
			return track.ErrNilTracker
		}
		c.tracker = t
		return nil
	}}
}

// CacheName names a Cache in its CacheStats, which metrics use as an
// attribute (default "mask"); keep it low-cardinality.
func CacheName(name string) CacheOption {
	return cacheOption{name: "CacheName", fn: func(c *cacheConfig) error {
		if name == "" {
			return fmt.Errorf("empty name")
		}
		c.name = name
		return nil
	}}
}
