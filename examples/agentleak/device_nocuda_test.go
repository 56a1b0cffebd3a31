//go:build !cuda

package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
)

// -device cuda:N in a binary built without the cuda tag fails before any
// request, saying how to build one with it.
func TestDeviceCUDANeedsTheBuildTag(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-device", "cuda:0", "-profile", ""}, &out, false)
	require.ErrorIs(t, err, tensor.ErrNoDevice)
	assert.Contains(t, err.Error(), "cuda:0")
	assert.Contains(t, err.Error(), "build with -tags cuda")
	assert.Empty(t, out.String(), "nothing ran")

	err = run(context.Background(), []string{"-device", "gpu0"}, &out, false)
	require.Error(t, err)
	assert.Contains(t, out.String(), `invalid value "gpu0" for flag -device`)
}
