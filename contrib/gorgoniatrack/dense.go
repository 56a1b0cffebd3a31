package gorgoniatrack

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"unsafe"

	gorgonia "gorgonia.org/tensor"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// New makes a zeroed Dense of dtype dt and shape dims (none: a scalar) in
// memory allocated first, as a tracked tensor under ctx, at the caller's
// line; ctx's request owns it, and the Dense's engine is e.For(ctx), so
// what gorgonia allocates from it is ctx's too. When the budget is spent it
// returns the allocator's *tensor.OOMError (matching tensor.ErrOutOfMemory)
// and no Dense, where gorgonia alone would panic. A Dense it made and
// dropped without Free is reported dropped at the caller's line (see the
// package doc). A negative dimension or a byte count that overflows is an
// error matching tensor.ErrInvalidShape; a dtype that holds Go pointers
// (strings, interfaces), which the collector would not see in device
// memory, one matching tensor.ErrInvalidDType.
func New(ctx context.Context, e *Engine, dt gorgonia.Dtype, dims ...int) (*gorgonia.Dense, error) {
	d, _, err := newDense(ctx, e, dt, dims, true)
	return d, err
}

// FromSlice makes a Dense holding a copy of data, as New does. Without dims
// it is a vector of len(data); with dims, their product must equal
// len(data), or it is an error matching tensor.ErrInvalidShape.
func FromSlice[T any](ctx context.Context, e *Engine, data []T, dims ...int) (*gorgonia.Dense, error) {
	if len(dims) == 0 {
		dims = []int{len(data)}
	}
	n := 1
	for _, d := range dims {
		if d < 0 || (d > 0 && n > len(data)/d) {
			n = -1
			break
		}
		n *= d
	}
	if n != len(data) {
		return nil, fmt.Errorf("%w: gorgoniatrack.FromSlice: %d values for shape %v", tensor.ErrInvalidShape, len(data), dims)
	}
	d, mem, err := newDense(ctx, e, gorgonia.Dtype{Type: reflect.TypeFor[T]()}, dims, false)
	if err != nil {
		return nil, err
	}
	var zero T
	copy(mem, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), len(data)*int(unsafe.Sizeof(zero))))
	return d, nil
}

// Watch makes an engine's Dense that gorgonia allocated (made WithEngine,
// or the result of an operation) watched as New's are: dropped without Free,
// it is reported dropped at the line of its allocation. Watching one twice
// does nothing. A Dense whose memory is no live allocation of a
// gorgoniatrack Engine (a view, one freed, another engine's) is an error
// matching tensor.ErrInvalidPointer.
func Watch(d *gorgonia.Dense) error {
	e, err := engineOf(d, "Watch")
	if err != nil {
		return err
	}
	if d.MemSize() == 0 {
		return nil // empty: nothing to leak
	}
	addr := d.Uintptr()
	s := e.live.shard(addr)
	s.mu.Lock()
	b := s.m[addr]
	watched := b != nil && b.handle == nil
	s.mu.Unlock()
	if b == nil || b.MemSize() != d.MemSize() {
		return fmt.Errorf("%w: gorgoniatrack.Watch: %#x is no live allocation of this engine", tensor.ErrInvalidPointer, addr)
	}
	if watched {
		return nil // New's, or watched already
	}
	return e.hold(d, b)
}

// Free frees d's memory through its engine: e.Free(d, d.MemSize()) for d's
// Engine e. A Dense of another engine is an error matching
// tensor.ErrInvalidPointer. d must not be used after.
func Free(d *gorgonia.Dense) error {
	e, err := engineOf(d, "Free")
	if err != nil {
		return err
	}
	return e.Free(d, int64(d.MemSize()))
}

// HandTo gives d's allocation to owner, as tensor.Tensor.HandTo does: a
// cache that keeps Denses past their request on purpose hands each to its
// track.Owner, which is then judged by its bound rather than each Dense by
// its request. It must not race with d's Free. A Dense that holds no live
// allocation of a gorgoniatrack Engine is an error matching
// tensor.ErrInvalidPointer.
func HandTo(d *gorgonia.Dense, owner *track.Owner) error {
	h, err := handleOf(d, "HandTo")
	if err != nil {
		return err
	}
	return h.HandTo(owner)
}

// HandBack ends d's HandTo, as tensor.Tensor.HandBack does: the owner lets
// go of d without freeing it.
func HandBack(d *gorgonia.Dense) error {
	h, err := handleOf(d, "HandBack")
	if err != nil {
		return err
	}
	return h.HandBack()
}

// handleOf returns the handle of the allocation d's memory is.
func handleOf(d *gorgonia.Dense, op string) (*tensor.Tensor, error) {
	e, err := engineOf(d, op)
	if err != nil {
		return nil, err
	}
	var h *tensor.Tensor
	if d.MemSize() > 0 {
		addr := d.Uintptr()
		s := e.live.shard(addr)
		s.mu.Lock()
		if b := s.m[addr]; b != nil && b.MemSize() == d.MemSize() {
			h = b.handle
			if h == nil {
				h = b.weakHandle.Value()
			}
		}
		s.mu.Unlock()
	}
	if h == nil {
		return nil, fmt.Errorf("%w: gorgoniatrack.%s: the Dense holds no live allocation of this engine", tensor.ErrInvalidPointer, op)
	}
	return h, nil
}

// engineOf returns d's Engine.
func engineOf(d *gorgonia.Dense, op string) (*Engine, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: gorgoniatrack.%s(nil)", tensor.ErrInvalidPointer, op)
	}
	e, ok := d.Engine().(*Engine)
	if !ok {
		return nil, fmt.Errorf("%w: gorgoniatrack.%s: the Dense's engine is %T, not a gorgoniatrack Engine", tensor.ErrInvalidPointer, op, d.Engine())
	}
	return e, nil
}

// newDense allocates and builds a Dense for New and FromSlice, and returns
// its memory, zeroed if zero is set.
//
//go:noinline
func newDense(ctx context.Context, e *Engine, dt gorgonia.Dtype, dims []int, zero bool) (d *gorgonia.Dense, mem []byte, err error) {
	if e == nil {
		return nil, nil, fmt.Errorf("%w: gorgoniatrack: nil Engine", tensor.ErrNilAllocator)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if dt.Type == nil { // a zero Dtype, whose String panics
		return nil, nil, fmt.Errorf("%w: gorgoniatrack: the zero Dtype", tensor.ErrInvalidDType)
	}
	if hasPointers(dt.Type) {
		return nil, nil, fmt.Errorf("%w: gorgoniatrack: dtype %v holds Go pointers, which the collector cannot see in device memory", tensor.ErrInvalidDType, dt)
	}
	elems := int64(1)
	for _, n := range dims {
		if n < 0 || (n > 0 && elems > math.MaxInt64/int64(n)) {
			return nil, nil, fmt.Errorf("%w: gorgoniatrack: shape %v", tensor.ErrInvalidShape, dims)
		}
		elems *= int64(n)
	}
	size := int64(dt.Size())
	if size > 0 && elems > math.MaxInt64/size {
		return nil, nil, fmt.Errorf("%w: gorgoniatrack: shape %v of %v overflows", tensor.ErrInvalidShape, dims, dt)
	}
	bytes := elems * size
	bound := e.For(ctx)
	shape := append([]int(nil), dims...)
	if bytes == 0 {
		// Nothing to allocate or to leak: gorgonia asks Alloc for 0 bytes.
		d, err = build(gorgonia.WithShape(shape...), gorgonia.Of(dt), gorgonia.WithEngine(bound))
		return d, nil, err
	}
	spec := tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{int(bytes)}, Kind: Kind}
	if t := lifeDType(dt); t != tensor.InvalidDType {
		spec.DType, spec.Shape = t, tensor.Shape(shape)
		if len(shape) == 0 {
			spec.Shape = tensor.Shape{1} // gorgonia's scalar holds one element
		}
	}
	b, err := e.live.alloc(ctx, spec, bytes, zero)
	if err != nil {
		return nil, nil, err
	}
	d, err = build(gorgonia.WithShape(shape...), gorgonia.Of(dt), gorgonia.WithEngine(bound),
		gorgonia.FromMemory(b.Uintptr(), b.MemSize()))
	if err == nil {
		err = bound.hold(d, b)
	}
	if err != nil {
		return nil, nil, errors.Join(err, e.live.free(b.Uintptr(), bytes, nil))
	}
	return d, b.mem, nil
}

// hold gives d an engine of its own, bound to e's context, that holds b's
// handle while the table holds it weakly: the handle is then reachable
// exactly while d (or a view or result of d, which share its engine) is.
func (e *Engine) hold(d *gorgonia.Dense, b *block) error {
	h := e.live.watch(b)
	if h == nil {
		return fmt.Errorf("%w: gorgoniatrack: the allocation at %#x was freed meanwhile", tensor.ErrInvalidPointer, b.Uintptr())
	}
	own := &Engine{stdOps: e.stdOps, ctx: e.ctx, live: e.live, held: h}
	gorgonia.WithEngine(own)(d)
	return nil
}

// build runs gorgonia's constructor, whose checks panic, as an error.
func build(opts ...gorgonia.ConsOpt) (d *gorgonia.Dense, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: gorgoniatrack: gorgonia refused the Dense: %v", tensor.ErrInvalidShape, r)
		}
	}()
	return gorgonia.New(opts...), nil
}

// lifeDType returns the tensorlife dtype recorded for a gorgonia dtype;
// InvalidDType for those tensorlife has no name for, recorded as bytes.
func lifeDType(dt gorgonia.Dtype) tensor.DType {
	switch dt {
	case gorgonia.Bool:
		return tensor.Bool
	case gorgonia.Uint8:
		return tensor.Uint8
	case gorgonia.Int8:
		return tensor.Int8
	case gorgonia.Int32:
		return tensor.Int32
	case gorgonia.Int64:
		return tensor.Int64
	case gorgonia.Float32:
		return tensor.Float32
	case gorgonia.Float64:
		return tensor.Float64
	}
	return tensor.InvalidDType
}

// hasPointers reports whether values of t hold Go pointers.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.String, reflect.Interface, reflect.Pointer, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	}
	return false
}
