package tensor

import (
	"context"

	"github.com/tensorlife/tensorlife/internal/hotpath"
)

// Package tensor/foreign makes adopted tensors with newTensor, from an
// allocator of its own, so that an adopted tensor is a tensor in every way;
// the hook keeps that mechanism out of this package's API. The closure is
// one frame between foreign's caller and newTensor, which its skip counts.
func init() {
	hotpath.Tensor.Make = func(ctx context.Context, alloc, spec any, skip int) (any, error) {
		s := spec.(Spec)
		t, err := newTensor(ctx, alloc.(Allocator), s.DType, s.Shape, s.Kind, skip+1)
		if err != nil {
			return nil, err // not a nil *Tensor in an interface
		}
		return t, nil
	}
}
