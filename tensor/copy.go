package tensor

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"unsafe"
)

// CopyFromHost copies src, which must be exactly Bytes() long, to the tensor.
func (t *Tensor) CopyFromHost(src []byte) error {
	return t.copyFromHost(0, src, true)
}

// CopyToHost copies the tensor into dst, which must be exactly Bytes() long.
func (t *Tensor) CopyToHost(dst []byte) error {
	return t.copyToHost(0, dst, true)
}

// CopyFromHostAt copies src to the tensor's bytes starting at byte off; src
// may cover any range inside the tensor, which is how a growing mask copies
// only its new bytes.
func (t *Tensor) CopyFromHostAt(off int64, src []byte) error {
	return t.copyFromHost(off, src, false)
}

// CopyToHostAt copies len(dst) bytes starting at byte off into dst; the
// range must lie inside the tensor.
func (t *Tensor) CopyToHostAt(off int64, dst []byte) error {
	return t.copyToHost(off, dst, false)
}

// copyFromHost copies src to off; with whole set, src must cover the tensor
// exactly.
func (t *Tensor) copyFromHost(off int64, src []byte, whole bool) error {
	if err := t.rangeCheck(off, int64(len(src)), whole); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	err := t.onDevice("CopyToDevice", "copy to device", int64(len(src)), func(d Device) error {
		return d.CopyToDevice(t.blk().mem.Ptr.Add(t.offset()+off), src)
	})
	// t must stay reachable until the copy is done: otherwise a handle the
	// caller drops right after this call could be found leaked mid-copy and
	// its memory handed to another tensor.
	runtime.KeepAlive(t)
	return err
}

func (t *Tensor) copyToHost(off int64, dst []byte, whole bool) error {
	if err := t.rangeCheck(off, int64(len(dst)), whole); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	err := t.onDevice("CopyToHost", "copy to host", int64(len(dst)), func(d Device) error {
		return d.CopyToHost(dst, t.blk().mem.Ptr.Add(t.offset()+off))
	})
	runtime.KeepAlive(t) // see copyFromHost
	return err
}

// Fill sets every byte of the tensor to value.
func (t *Tensor) Fill(value byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if t.Bytes() == 0 {
		return nil
	}
	err := t.onDevice("Memset", "memset", t.Bytes(), func(d Device) error {
		return d.Memset(t.blk().mem.Ptr.Add(t.offset()), value, t.Bytes())
	})
	runtime.KeepAlive(t) // see copyFromHost
	return err
}

func (t *Tensor) rangeCheck(off, n int64, whole bool) error {
	if err := t.check(); err != nil {
		return err
	}
	if whole && (off != 0 || n != t.Bytes()) {
		return fmt.Errorf("%w: %d bytes for %v", ErrSizeMismatch, n, t)
	}
	if off < 0 || n < 0 || off > t.Bytes() || n > t.Bytes()-off {
		return fmt.Errorf("%w: %d bytes at offset %d of %v", ErrSizeMismatch, n, off, t)
	}
	return nil
}

// Element is the Go types that map onto a DType. Float16 and BFloat16 have no
// Go type; move them as raw bytes with CopyFromHost.
type Element interface {
	~bool | ~uint8 | ~int8 | ~int32 | ~int64 | ~float32 | ~float64
}

// DTypeOf returns the DType of Go type T (named types by their underlying
// type).
func DTypeOf[T Element]() DType {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Bool:
		return Bool
	case reflect.Uint8:
		return Uint8
	case reflect.Int8:
		return Int8
	case reflect.Int32:
		return Int32
	case reflect.Int64:
		return Int64
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	}
	return InvalidDType // unreachable: Element admits no other kinds
}

// asBytes views a slice of elements as its bytes, without copying.
func asBytes[T Element](data []T) []byte {
	if len(data) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), len(data)*int(unsafe.Sizeof(zero)))
}

// FromSlice makes a tensor holding a copy of data. Without dims it is
// one-dimensional; with dims, their product must equal len(data).
//
//go:noinline
func FromSlice[T Element](ctx context.Context, alloc Allocator, data []T, dims ...int) (*Tensor, error) {
	dt := DTypeOf[T]()
	if len(dims) == 0 {
		dims = []int{len(data)}
	}
	n, err := Shape(dims).Elements()
	if err != nil {
		return nil, err
	}
	if n != int64(len(data)) {
		return nil, fmt.Errorf("%w: %d elements for shape %v", ErrSizeMismatch, len(data), Shape(dims))
	}
	t, err := newTensor(ctx, alloc, dt, dims, "", 1)
	if err != nil {
		return nil, err
	}
	if err := t.CopyFromHost(asBytes(data)); err != nil {
		return nil, joinFree(err, t)
	}
	return t, nil
}

// ToSlice copies the tensor into a new []T. T must match the tensor's dtype.
func ToSlice[T Element](t *Tensor) ([]T, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if dt := DTypeOf[T](); dt != t.blk().dtype {
		return nil, fmt.Errorf("%w: reading %v as %v", ErrInvalidDType, t.blk().dtype, dt)
	}
	n, _ := t.shapeRef().Elements() // checked when the tensor or view was made
	out := make([]T, n)
	if err := t.CopyToHost(asBytes(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// joinFree frees t after err, keeping both errors.
func joinFree(err error, t *Tensor) error {
	if ferr := t.Free(); ferr != nil {
		return fmt.Errorf("%w (and freeing it: %w)", err, ferr)
	}
	return err
}
