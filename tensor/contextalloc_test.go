package tensor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
)

// ctxKey marks the context a tensor is made under.
type ctxKey struct{}

// contextAllocator remembers the context of each allocation.
type contextAllocator struct {
	*tensor.DeviceAllocator
	seen []any
}

func (a *contextAllocator) AllocateContext(ctx context.Context, bytes int64) (tensor.Block, error) {
	a.seen = append(a.seen, ctx.Value(ctxKey{}))
	return a.Allocate(bytes)
}

var _ tensor.ContextAllocator = (*contextAllocator)(nil)

// New and Make hand a ContextAllocator the tensor's context; an empty
// tensor allocates nothing and asks nothing.
func TestNewPassesContextToContextAllocator(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	da, err := tensor.NewDeviceAllocator(dev, nil)
	require.NoError(t, err)
	a := &contextAllocator{DeviceAllocator: da}
	ctx := context.WithValue(context.Background(), ctxKey{}, "request 1")

	x, err := tensor.New(ctx, a, tensor.Float32, 16)
	require.NoError(t, err)
	y, err := tensor.Make(ctx, a, tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{8}})
	require.NoError(t, err)
	empty, err := tensor.New(ctx, a, tensor.Float32, 0)
	require.NoError(t, err)
	assert.Equal(t, []any{"request 1", "request 1"}, a.seen)
	require.NoError(t, x.Free())
	require.NoError(t, y.Free())
	require.NoError(t, empty.Free())
}
