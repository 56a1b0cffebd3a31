package mask

import "errors"

// Sentinel errors. Every error this package returns matches one of these,
// or one of package tensor's (tensor.ErrFreed, tensor.ErrOutOfMemory,
// tensor.ErrInvalidShape, tensor.ErrNilAllocator), with errors.Is.
var (
	// ErrEmptyBatch means a builder was given no sequences.
	ErrEmptyBatch = errors.New("mask: empty batch")
	// ErrInvalidLength means a negative length or sequence length, or a
	// length longer than the sequence it belongs to.
	ErrInvalidLength = errors.New("mask: invalid length")
	// ErrShapeMismatch means inputs that should agree in size do not: token
	// rows of different lengths, or a per-sequence slice whose length is not
	// the mask's batch size.
	ErrShapeMismatch = errors.New("mask: shape mismatch")
	// ErrCapacity means a growable mask cannot hold more tokens: the
	// builder's MaxLength, or a size whose byte count overflows.
	ErrCapacity = errors.New("mask: capacity exceeded")
	// ErrUnsupportedDType means a dtype that masks are not made of.
	ErrUnsupportedDType = errors.New("mask: unsupported dtype")
	// ErrMaskRebuilt is returned, in strict mode (Strict), when a call site
	// builds a second mask for the same request. The *RebuildError that
	// matches it names the site and the request.
	ErrMaskRebuilt = errors.New("mask: mask rebuilt")
	// ErrInvalidOption means an option's value cannot be used, such as a
	// negative MaxBytes.
	ErrInvalidOption = errors.New("mask: invalid option")
	// ErrNilMask means a nil tensor was given to a Cache, or a GetOrBuild
	// build function returned a nil tensor with a nil error.
	ErrNilMask = errors.New("mask: nil mask tensor")
	// ErrNilCache means a method that must store something was called on a
	// nil *Cache. Reads of a nil Cache miss instead.
	ErrNilCache = errors.New("mask: nil cache")
	// ErrCacheClosed means Put or GetOrBuild on a closed Cache.
	ErrCacheClosed = errors.New("mask: cache closed")
	// ErrKeyTooLong means a Cache key longer than MaxKeyBytes.
	ErrKeyTooLong = errors.New("mask: cache key too long")
)
