package mask

import (
	"fmt"

	"github.com/tensorlife/tensorlife/internal/option"
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
	}
	if err := option.Apply(&cfg, opts, BuilderOption.applyBuilder, ErrInvalidOption); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func newCacheConfig(opts []CacheOption) (cacheConfig, error) {
	cfg := cacheConfig{name: "mask", maxBytes: DefaultCacheBytes, maxEntries: DefaultCacheEntries}
	if err := option.Apply(&cfg, opts, CacheOption.applyCache, ErrInvalidOption); err != nil {
		return cfg, err
	}
	return cfg, nil
}

type builderOptionFunc func(*builderConfig) error

func (f builderOptionFunc) applyBuilder(c *builderConfig) error { return f(c) }

type cacheOptionFunc func(*cacheConfig) error

func (f cacheOptionFunc) applyCache(c *cacheConfig) error { return f(c) }

// DType sets the element type of the masks a Builder makes (default
// tensor.Bool). tensor.Bool and tensor.Uint8 hold 1 where attention is
// allowed and 0 where it is masked; tensor.Float32, tensor.Float16 and
// tensor.BFloat16 are additive masks, added to attention scores before the
// softmax: 0 where allowed and MaskedBias where masked (see MaskedBias for
// float16).
func DType(dt tensor.DType) BuilderOption {
	return builderOptionFunc(func(c *builderConfig) error {
		if _, err := encodingOf(dt); err != nil {
			return fmt.Errorf("DType(%v): %w", dt, err)
		}
		c.dtype = dt
		return nil
	})
}

// MaxLength bounds how many tokens a Growable from this Builder may hold:
// the model's context window. Growth never allocates past it, and an Append
// past it returns an error matching ErrCapacity. Zero, the default, means
// no bound but overflow.
func MaxLength(tokens int) BuilderOption {
	return builderOptionFunc(option.AtLeast("MaxLength", tokens, 0, func(c *builderConfig, n int) { c.maxLength = n }))
}

// DetectRebuilds turns rebuild detection on (the default) or off. See
// Builder for what counts as a rebuild.
func DetectRebuilds(on bool) BuilderOption {
	return builderOptionFunc(option.Set(on, func(c *builderConfig, on bool) { c.detect = on }))
}

// Strict turns a detected rebuild into an error: the builder frees the mask
// it just made and returns a *RebuildError matching ErrMaskRebuilt. The
// error is the report: the default log warning is not written (OnRebuild
// is still called). Use it in tests and staging, where a rebuilt mask
// should fail loudly.
func Strict(on bool) BuilderOption {
	return builderOptionFunc(option.Set(on, func(c *builderConfig, on bool) { c.strict = on }))
}

// RememberRequests bounds the memory of rebuild detection: the Builder
// remembers the n (call site, request labels) pairs that built masks most
// recently (default DefaultRememberRequests) and forgets the least recently
// used beyond that. Detection state keyed by request must be bounded, or it
// would itself grow with every request served.
func RememberRequests(n int) BuilderOption {
	return builderOptionFunc(option.Within("RememberRequests", n, 1, 1<<20, func(c *builderConfig, n int) { c.remember = n }))
}

// OnRebuild sets the function told of every detected rebuild, in place of
// the default log warning. It runs on the goroutine that built the mask,
// with no lock held, before the builder returns; it must not block.
func OnRebuild(f func(Rebuild)) BuilderOption {
	return builderOptionFunc(option.NotNil("OnRebuild", f, func(c *builderConfig, f func(Rebuild)) { c.onRebuild = f }))
}

// MaxBytes sets a Cache's byte budget: what its entries cost together
// never exceeds it (default DefaultCacheBytes). An entry costs the device
// memory its mask holds, the length of its key and CacheEntryOverhead
// (see Cache). Zero is valid and caches nothing.
func MaxBytes(n int64) CacheOption {
	return cacheOptionFunc(option.AtLeast("MaxBytes", n, 0, func(c *cacheConfig, n int64) { c.maxBytes = n }))
}

// MaxEntries sets how many masks a Cache holds at most (default
// DefaultCacheEntries). Zero is valid and caches nothing.
func MaxEntries(n int) CacheOption {
	return cacheOptionFunc(option.AtLeast("MaxEntries", n, 0, func(c *cacheConfig, n int) { c.maxEntries = n }))
}

// CacheTracker attaches the Cache to t when it is made (track.Attach), so
// that t's summary and metrics list it before it keeps its first mask.
// Without it a Cache attaches to the tracker of the first mask it keeps.
func CacheTracker(t *track.Tracker) CacheOption {
	return cacheOptionFunc(func(c *cacheConfig) error {
		if t == nil {
			return fmt.Errorf("CacheTracker(nil): %w", track.ErrNilTracker)
		}
		c.tracker = t
		return nil
	})
}

// CacheName names a Cache in its CacheStats, which metrics use as an
// attribute (default "mask"); keep it low-cardinality.
func CacheName(name string) CacheOption {
	return cacheOptionFunc(option.NotEmpty("CacheName", "a name", name, func(c *cacheConfig, name string) { c.name = name }))
}
