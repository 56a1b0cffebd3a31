package mask

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

// buildCase is one builder call and what it must produce.
type buildCase struct {
	name  string
	build func(ctx context.Context, b *Builder) (*tensor.Tensor, error)
	shape tensor.Shape
	want  func(dt tensor.DType) []byte
}

func buildCases() []buildCase {
	tokens := [][]int32{{0, 0, 5, 6, 7}, {8, 9, 0, 10, 0}, {0, 0, 0, 0, 0}}
	return []buildCase{
		{"padding", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Padding(ctx, []int{3, 0, 5, 1}, 5)
		}, tensor.Shape{4, 5}, func(dt tensor.DType) []byte { return refPadding(dt, []int{3, 0, 5, 1}, 5) }},
		{"padding empty sequence", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Padding(ctx, []int{0, 0}, 0)
		}, tensor.Shape{2, 0}, func(dt tensor.DType) []byte { return []byte{} }},
		{"padding chunked", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Padding(ctx, []int{40000, 17, 39999}, 40000)
		}, tensor.Shape{3, 40000}, func(dt tensor.DType) []byte { return refPadding(dt, []int{40000, 17, 39999}, 40000) }},
		{"tokens", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.PaddingFromTokens(ctx, tokens, 0)
		}, tensor.Shape{3, 5}, func(dt tensor.DType) []byte { return refTokens(dt, tokens, 0) }},
		{"tokens empty rows", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.PaddingFromTokens(ctx, [][]int32{{}, {}}, 0)
		}, tensor.Shape{2, 0}, func(dt tensor.DType) []byte { return []byte{} }},
		{"causal", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Causal(ctx, 6)
		}, tensor.Shape{6, 6}, func(dt tensor.DType) []byte { return refCausal(dt, 6) }},
		{"causal one", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Causal(ctx, 1)
		}, tensor.Shape{1, 1}, func(dt tensor.DType) []byte { return refCausal(dt, 1) }},
		{"causal chunked", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Causal(ctx, 300)
		}, tensor.Shape{300, 300}, func(dt tensor.DType) []byte { return refCausal(dt, 300) }},
		{"causal padding", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.CausalPadding(ctx, []int{4, 2, 0, 6}, 6)
		}, tensor.Shape{4, 6, 6}, func(dt tensor.DType) []byte { return refCausalPadding(dt, []int{4, 2, 0, 6}, 6) }},
		{"causal padding chunked", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.CausalPadding(ctx, []int{150, 77}, 150)
		}, tensor.Shape{2, 150, 150}, func(dt tensor.DType) []byte { return refCausalPadding(dt, []int{150, 77}, 150) }},
	}
}

func TestBuildersMatchReference(t *testing.T) {
	for _, dt := range maskDTypes {
		for _, tc := range buildCases() {
			t.Run(fmt.Sprintf("%v/%s", dt, tc.name), func(t *testing.T) {
				e := newEnv(t)
				b := e.builder(t, DType(dt))
				m, err := tc.build(context.Background(), b)
				require.NoError(t, err)
				defer free(t, m)

				assert.Equal(t, dt, m.DType())
				assert.Equal(t, tc.shape, m.Shape())
				assert.Equal(t, Kind, m.Kind())
				want := tc.want(dt)
				assert.Equal(t, int64(len(want)), m.Bytes())
				assert.Equal(t, want, readBytes(t, m))
			})
		}
	}
}

func TestMaskedValues(t *testing.T) {
	tests := []struct {
		dt   tensor.DType
		want float64
		bits func([]byte) float64
	}{
		{tensor.Float32, -1e9, func(b []byte) float64 {
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}},
		{tensor.BFloat16, -998244352, func(b []byte) float64 {
			return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
		}},
		{tensor.Float16, -65504, func(b []byte) float64 {
			h := binary.LittleEndian.Uint16(b) // normal numbers and zero suffice here
			if h&0x7FFF == 0 {
				return 0
			}
			v := math.Ldexp(1+float64(h&0x3FF)/1024, int(h>>10&0x1F)-15)
			if h&0x8000 != 0 {
				v = -v
			}
			return v
		}},
	}
	for _, tc := range tests {
		t.Run(tc.dt.String(), func(t *testing.T) {
			e := newEnv(t)
			b := e.builder(t, DType(tc.dt))
			m, err := b.Padding(context.Background(), []int{1}, 2)
			require.NoError(t, err)
			defer free(t, m)
			got := readBytes(t, m)
			size := tc.dt.Size()
			assert.Zero(t, tc.bits(got[:size]), "attended position")
			assert.Equal(t, tc.want, tc.bits(got[size:]), "masked position")
		})
	}
}

func TestBuilderBadInput(t *testing.T) {
	tests := []struct {
		name  string
		build func(ctx context.Context, b *Builder) (*tensor.Tensor, error)
		want  error
	}{
		{"padding empty batch", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Padding(ctx, nil, 4)
		}, ErrEmptyBatch},
		{"padding negative length", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Padding(ctx, []int{2, -1}, 4)
		}, ErrInvalidLength},
		{"padding length past sequence", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Padding(ctx, []int{2, 5}, 4)
		}, ErrInvalidLength},
		{"padding negative sequence", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Padding(ctx, []int{0}, -1)
		}, ErrInvalidLength},
		{"tokens empty batch", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.PaddingFromTokens(ctx, [][]int32{}, 0)
		}, ErrEmptyBatch},
		{"tokens ragged", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.PaddingFromTokens(ctx, [][]int32{{1, 2, 3}, {1, 2}}, 0)
		}, ErrShapeMismatch},
		{"causal negative", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Causal(ctx, -3)
		}, ErrInvalidLength},
		{"causal overflow", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Causal(ctx, 1<<40)
		}, tensor.ErrInvalidShape},
		{"causal larger than the device", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.Causal(ctx, 1<<20)
		}, tensor.ErrOutOfMemory},
		{"causal padding empty batch", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.CausalPadding(ctx, []int{}, 4)
		}, ErrEmptyBatch},
		{"causal padding length past sequence", func(ctx context.Context, b *Builder) (*tensor.Tensor, error) {
			return b.CausalPadding(ctx, []int{9}, 4)
		}, ErrInvalidLength},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			b := e.builder(t)
			m, err := tc.build(context.Background(), b)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			assert.Nil(t, m)
			assert.Zero(t, e.dev.allocs.Load(), "bad input reached the device")
		})
	}
}

func TestBuilderFailuresLeaveNothingLive(t *testing.T) {
	t.Run("allocation fails", func(t *testing.T) {
		host, err := tensor.NewHostDevice(1 << 20)
		require.NoError(t, err)
		dev, err := tensortest.NewFaulty(host, tensortest.FailNth(1))
		require.NoError(t, err)
		e := newEnv(t)
		alloc, err := tensor.NewDeviceAllocator(dev, e.tr)
		require.NoError(t, err)
		b, err := NewBuilder(alloc)
		require.NoError(t, err)

		_, err = b.Causal(context.Background(), 8)
		assert.ErrorIs(t, err, tensor.ErrOutOfMemory)
		m, err := b.Causal(context.Background(), 8)
		require.NoError(t, err, "the builder works after a failure")
		assert.Equal(t, refCausal(tensor.Bool, 8), readBytes(t, m))
		free(t, m)
		bytes, blocks := dev.Outstanding()
		assert.Zero(t, bytes)
		assert.Zero(t, blocks)
	})
	t.Run("copy fails", func(t *testing.T) {
		e := newEnv(t)
		b := e.builder(t)
		e.dev.failCopiesAfter.Store(1) // the second chunk fails
		_, err := b.Causal(context.Background(), 300)
		assert.ErrorIs(t, err, errCopy)
		assert.Zero(t, e.tr.Totals().LiveCount, "the half-written mask was freed")
	})
}

func TestOptions(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		opts []BuilderOption
		want []error
	}{
		{"nil option", []BuilderOption{nil}, []error{ErrInvalidOption}},
		{"unsupported dtype", []BuilderOption{DType(tensor.Int32)}, []error{ErrInvalidOption, ErrUnsupportedDType}},
		{"invalid dtype", []BuilderOption{DType(tensor.InvalidDType)}, []error{ErrInvalidOption, ErrUnsupportedDType}},
		{"negative max length", []BuilderOption{MaxLength(-1)}, []error{ErrInvalidOption}},
		{"remember none", []BuilderOption{RememberRequests(0)}, []error{ErrInvalidOption}},
		{"nil callback", []BuilderOption{OnRebuild(nil)}, []error{ErrInvalidOption}},
	}
	for _, tc := range tests {
		t.Run("builder/"+tc.name, func(t *testing.T) {
			b, err := NewBuilder(e.alloc, tc.opts...)
			assert.Nil(t, b)
			for _, w := range tc.want {
				assert.ErrorIs(t, err, w)
			}
		})
	}
	cacheTests := []struct {
		name string
		opts []CacheOption
	}{
		{"nil option", []CacheOption{nil}},
		{"negative budget", []CacheOption{MaxBytes(-1)}},
		{"negative entries", []CacheOption{MaxEntries(-1)}},
		{"empty name", []CacheOption{CacheName("")}},
	}
	for _, tc := range cacheTests {
		t.Run("cache/"+tc.name, func(t *testing.T) {
			c, err := NewCache(tc.opts...)
			assert.Nil(t, c)
			assert.ErrorIs(t, err, ErrInvalidOption)
		})
	}
	t.Run("nil allocator", func(t *testing.T) {
		_, err := NewBuilder(nil)
		assert.ErrorIs(t, err, tensor.ErrNilAllocator)
		var typedNil *tensor.DeviceAllocator
		_, err = NewBuilder(typedNil)
		assert.ErrorIs(t, err, tensor.ErrNilAllocator)
	})
	t.Run("valid", func(t *testing.T) {
		b, err := NewBuilder(e.alloc, DType(tensor.Float16), MaxLength(8), Strict(true), RememberRequests(3), DetectRebuilds(true))
		require.NoError(t, err)
		assert.Equal(t, tensor.Float16, b.DType())
		assert.Same(t, e.alloc, b.Allocator())
	})
}
