//go:build !cuda

package cuda_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/cuda"
)

func TestOpenWithoutCUDA(t *testing.T) {
	assert.False(t, cuda.Enabled)
	d, err := cuda.Open(1)
	assert.Nil(t, d)
	require.ErrorIs(t, err, tensor.ErrNoDevice)
	var de *tensor.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "cuda:1", de.Device)
	assert.Equal(t, "open", de.Op)
	assert.Contains(t, err.Error(), "-tags cuda")
	assert.Contains(t, err.Error(), "scripts/cuda-env.sh")

	_, err = cuda.Open(0, cuda.WithMemoryLimit(-1))
	assert.ErrorIs(t, err, cuda.ErrInvalidOption, "options are checked first")
}
