//go:build !cuda

package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
)

// -device cuda:N in a binary built without the cuda tag fails at start,
// saying how to build one with it.
func TestDeviceCUDANeedsTheBuildTag(t *testing.T) {
	var out syncBuffer
	err := run(context.Background(), []string{"-device", "cuda:1", "-addr", "127.0.0.1:0"}, &out)
	require.ErrorIs(t, err, tensor.ErrNoDevice)
	assert.Contains(t, err.Error(), "cuda:1")
	assert.Contains(t, err.Error(), "build with -tags cuda")

	err = run(context.Background(), []string{"-device", "cuda"}, &out)
	require.Error(t, err)
	assert.Contains(t, out.String(), `invalid value "cuda" for flag -device`)
}
