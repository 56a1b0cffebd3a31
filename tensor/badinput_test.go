package tensor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// Every entry point of the package doc's list of errors, fed each bad
// input it names, returns an error matching the sentinel it names.
func TestEveryEntryPointRefusesBadInputWithItsTypedError(t *testing.T) {
	ctx := context.Background()
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	tr, err := track.New()
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(host, tr)
	require.NoError(t, err)
	other, err := tensor.NewDeviceAllocator(host, nil)
	require.NoError(t, err)
	x, err := tensor.New(ctx, alloc, tensor.Float32, 4, 4)
	require.NoError(t, err)
	defer func() { require.NoError(t, x.Free()) }()
	freed, err := tensor.New(ctx, alloc, tensor.Uint8, 8)
	require.NoError(t, err)
	require.NoError(t, freed.Free())
	foreignBlock, err := other.Allocate(64)
	require.NoError(t, err)
	defer func() { require.NoError(t, other.Release(foreignBlock)) }()

	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"NewHostDevice negative capacity", func() error { _, err := tensor.NewHostDevice(-1); return err }, tensor.ErrInvalidSize},
		{"NewHostDevice nil option", func() error { _, err := tensor.NewHostDevice(64, nil); return err }, tensor.ErrInvalidOption},
		{"NewDeviceAllocator nil device", func() error { _, err := tensor.NewDeviceAllocator(nil, tr); return err }, tensor.ErrNilAllocator},
		{"New nil allocator", func() error { _, err := tensor.New(ctx, nil, tensor.Uint8, 1); return err }, tensor.ErrNilAllocator},
		{"New negative dimension", func() error { _, err := tensor.New(ctx, alloc, tensor.Uint8, -1); return err }, tensor.ErrInvalidShape},
		{"New overflowing shape", func() error { _, err := tensor.New(ctx, alloc, tensor.Float64, 1<<40, 1<<40); return err }, tensor.ErrInvalidShape},
		{"New bad dtype", func() error { _, err := tensor.New(ctx, alloc, tensor.DType(200), 1); return err }, tensor.ErrInvalidDType},
		{"New more than the device", func() error { _, err := tensor.New(ctx, alloc, tensor.Uint8, 2<<20); return err }, tensor.ErrOutOfMemory},
		{"Allocate zero bytes", func() error { _, err := alloc.Allocate(0); return err }, tensor.ErrInvalidSize},
		{"Release another allocator's block", func() error { return alloc.Release(foreignBlock) }, tensor.ErrForeignBlock},
		{"FromSlice shape not of the data", func() error {
			_, err := tensor.FromSlice(ctx, alloc, []float32{1, 2, 3}, 2, 2)
			return err
		}, tensor.ErrSizeMismatch},
		{"CopyFromHost wrong size", func() error { return x.CopyFromHost(make([]byte, 3)) }, tensor.ErrSizeMismatch},
		{"CopyToHostAt out of range", func() error { return x.CopyToHostAt(60, make([]byte, 8)) }, tensor.ErrSizeMismatch},
		{"View out of range", func() error { _, err := x.View(10, 8); return err }, tensor.ErrSizeMismatch},
		{"View bad shape", func() error { _, err := x.View(0, -1); return err }, tensor.ErrInvalidShape},
		{"HandTo nil owner", func() error { return x.HandTo(nil) }, track.ErrMisuse},
		{"HandBack nothing handed", func() error { return x.HandBack() }, track.ErrMisuse},
		{"Retain after Free", func() error { _, err := freed.Retain(); return err }, tensor.ErrFreed},
		{"Fill after Free", func() error { return freed.Fill(0) }, tensor.ErrFreed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), tc.want)
		})
	}
}
