//go:build !cuda

package devflag_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/devflag"
)

// A binary built without the cuda tag says how to get one with it.
func TestOpenCUDAWithoutTheTag(t *testing.T) {
	dev, err := devflag.Open(devflag.Spec{CUDA: true, Ordinal: 1}, 1<<20)
	assert.Nil(t, dev)
	require.ErrorIs(t, err, tensor.ErrNoDevice)
	assert.Contains(t, err.Error(), "cuda:1")
	assert.Contains(t, err.Error(), "build with -tags cuda")
}
