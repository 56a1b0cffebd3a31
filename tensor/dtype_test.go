package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
)

func TestDTypes(t *testing.T) {
	tests := []struct {
		dt   tensor.DType
		name string
		size int
	}{
		{tensor.Bool, "bool", 1}, {tensor.Uint8, "uint8", 1}, {tensor.Int8, "int8", 1},
		{tensor.Int32, "int32", 4}, {tensor.Int64, "int64", 8}, {tensor.Float16, "float16", 2},
		{tensor.BFloat16, "bfloat16", 2}, {tensor.Float32, "float32", 4}, {tensor.Float64, "float64", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.True(t, tt.dt.Valid())
			assert.Equal(t, tt.name, tt.dt.String())
			assert.Equal(t, tt.size, tt.dt.Size())
			parsed, err := tensor.ParseDType(tt.name)
			require.NoError(t, err)
			assert.Equal(t, tt.dt, parsed)
		})
	}
	assert.False(t, tensor.InvalidDType.Valid())
	assert.Equal(t, 0, tensor.DType(99).Size())
	assert.Equal(t, "dtype(99)", tensor.DType(99).String())

	type logit float32
	assert.Equal(t, tensor.Float32, tensor.DTypeOf[logit]())
	assert.Equal(t, tensor.Bool, tensor.DTypeOf[bool]())
}

func TestShapeBytes(t *testing.T) {
	tests := []struct {
		shape tensor.Shape
		dt    tensor.DType
		want  int64
		err   error
	}{
		{tensor.Shape{}, tensor.Float32, 4, nil},
		{tensor.Shape{2, 3, 4}, tensor.Float16, 48, nil},
		{tensor.Shape{0, 1 << 62}, tensor.Float64, 0, nil},
		{tensor.Shape{-1}, tensor.Float32, 0, tensor.ErrInvalidShape},
		{tensor.Shape{1 << 32, 1 << 32}, tensor.Uint8, 0, tensor.ErrInvalidShape},
		{tensor.Shape{1 << 62}, tensor.Int32, 0, tensor.ErrInvalidShape},
		{tensor.Shape{2}, tensor.InvalidDType, 0, tensor.ErrInvalidDType},
	}
	for _, tt := range tests {
		t.Run(tt.shape.String()+tt.dt.String(), func(t *testing.T) {
			got, err := tt.shape.Bytes(tt.dt)
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	s := tensor.Shape{1, 2}
	c := s.Clone()
	c[0] = 9
	assert.Equal(t, 1, s[0])
	assert.True(t, s.Equal(tensor.Shape{1, 2}))
	assert.False(t, s.Equal(c))
}

func FuzzShapeBytes(f *testing.F) {
	f.Add(int64(2), int64(3), int64(4), uint8(tensor.Float32))
	f.Add(int64(-1), int64(1), int64(1), uint8(tensor.Bool))
	f.Add(int64(1<<40), int64(1<<30), int64(7), uint8(tensor.Float64))
	f.Fuzz(func(t *testing.T, a, b, c int64, dt uint8) {
		shape := tensor.Shape{int(a), int(b), int(c)}
		n, err := shape.Bytes(tensor.DType(dt))
		if err != nil {
			return
		}
		// A valid byte count must equal the product computed in wide arithmetic.
		want := float64(a) * float64(b) * float64(c) * float64(tensor.DType(dt).Size())
		if float64(n) < want*0.999 || float64(n) > want*1.001 {
			t.Fatalf("%v %v: got %d bytes, want about %g", shape, tensor.DType(dt), n, want)
		}
	})
}
