package tensor

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/tensorlife/tensorlife/internal/format"
)

// DType is a tensor's element type.
type DType uint8

// The element types. Float16 and BFloat16 have no Go counterpart: they are
// stored as two bytes each and moved as raw bytes.
const (
	InvalidDType DType = iota
	Bool
	Uint8
	Int8
	Int32
	Int64
	Float16
	BFloat16
	Float32
	Float64
	numDTypes
)

var dtypeInfo = [numDTypes]struct {
	name string
	size int
}{
	{"invalid", 0}, {"bool", 1}, {"uint8", 1}, {"int8", 1}, {"int32", 4}, {"int64", 8},
	{"float16", 2}, {"bfloat16", 2}, {"float32", 4}, {"float64", 8},
}

// Valid reports whether d is a known element type.
func (d DType) Valid() bool { return d > InvalidDType && d < numDTypes }

// Size returns the bytes per element; 0 for an invalid dtype.
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeInfo[d].size
}

// String returns the dtype's name: "float32", "bool", ...
func (d DType) String() string {
	if !d.Valid() {
		return "dtype(" + strconv.Itoa(int(d)) + ")"
	}
	return dtypeInfo[d].name
}

// ParseDType returns the dtype named name, as String writes it.
func ParseDType(name string) (DType, error) {
	for d := Bool; d < numDTypes; d++ {
		if dtypeInfo[d].name == name {
			return d, nil
		}
	}
	return InvalidDType, fmt.Errorf("%w: %q", ErrInvalidDType, name)
}

// Shape is a tensor's dimensions, outermost first. A Shape with no
// dimensions is a scalar of one element; a zero dimension makes an empty
// tensor that holds no device memory.
type Shape []int

// Elements returns the number of elements, or an error matching
// ErrInvalidShape for a negative dimension or a count that overflows int64.
func (s Shape) Elements() (int64, error) {
	n := uint64(1)
	for i, d := range s {
		if d < 0 {
			return 0, fmt.Errorf("%w: dimension %d of %s is negative", ErrInvalidShape, i, s.String())
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > 1<<63-1 {
			return 0, fmt.Errorf("%w: %s has more than 2^63-1 elements", ErrInvalidShape, s.String())
		}
		n = lo
	}
	return int64(n), nil
}

// Bytes returns the bytes a tensor of this shape and dtype holds, checked for
// overflow.
func (s Shape) Bytes(dt DType) (int64, error) {
	if n, ok := s.smallBytes(dt); ok {
		return n, nil
	}
	if !dt.Valid() {
		return 0, fmt.Errorf("%w: %v", ErrInvalidDType, dt)
	}
	n, err := s.Elements()
	if err != nil {
		return 0, err
	}
	hi, lo := bits.Mul64(uint64(n), uint64(dt.Size()))
	if hi != 0 || lo > 1<<63-1 {
		return 0, fmt.Errorf("%w: %s of %v overflows int64 bytes", ErrInvalidShape, s.String(), dt)
	}
	return int64(lo), nil
}

// smallBytes returns Bytes for a valid dtype and a shape whose product
// needs no overflow check: every dimension in [0, 2^31) and the product
// before each multiply below 2^32, so that none passes 2^63. ok is false
// for every other shape, which Bytes checks with a full multiply.
func (s Shape) smallBytes(dt DType) (n int64, ok bool) {
	if !dt.Valid() {
		return 0, false
	}
	p := uint64(dtypeInfo[dt].size)
	for _, d := range s {
		if uint64(d) >= 1<<31 || p >= 1<<32 {
			return 0, false
		}
		p *= uint64(d)
	}
	return int64(p), true
}

// Clone returns a copy of s.
func (s Shape) Clone() Shape { return append(Shape(nil), s...) }

// Equal reports whether s and o have the same dimensions.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

// String renders the shape as [2 3 4].
func (s Shape) String() string { return format.Shape(s) }
