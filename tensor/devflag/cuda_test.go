//go:build cuda

package devflag_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/devflag"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

// On a GPU the capacity caps what the program takes from it, and Close gives
// back what is still allocated.
func TestOpenCUDA(t *testing.T) {
	dev, err := devflag.Open(devflag.Spec{CUDA: true}, 1<<20)
	if err != nil {
		tensortest.NoDevice(t, 0, "no CUDA device: %v", err)
	}
	assert.Equal(t, "cuda:0", dev.Name())
	_, total, err := dev.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), total)
	_, err = dev.Alloc(1<<20 + 1)
	assert.ErrorIs(t, err, tensor.ErrOutOfMemory)

	_, err = dev.Alloc(4096)
	require.NoError(t, err)
	assert.Equal(t, int64(4096), dev.Used())
	assert.Equal(t, 1, dev.Blocks())
	require.NoError(t, dev.Close())
	assert.Zero(t, dev.Blocks(), "Close freed the block")

	_, err = devflag.Open(devflag.Spec{CUDA: true, Ordinal: 1 << 20}, 1<<20)
	assert.ErrorIs(t, err, tensor.ErrNoDevice)
}
