//go:build cuda

package gorgoniatrack_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gorgonia "gorgonia.org/tensor"

	"github.com/tensorlife/tensorlife/contrib/gorgoniatrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/devflag"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// On a GPU (in CI, the fake driver, whose memory happens to be host
// memory) the engine refuses the device with a typed error: a Dense reads
// its memory in place, and on a real GPU that is a device address. The way
// that works is the one the package doc gives: keep the GPU's tensors in
// package tensor and copy what gorgonia computes on into a Dense on the
// host, both tracked by one tracker.
func TestCUDAAllocatorIsRefusedAndCopiesWork(t *testing.T) {
	gpu, err := devflag.Open(devflag.Spec{CUDA: true}, 16<<20)
	if err != nil {
		tensortest.NoDevice(t, 0, "no CUDA device: %v", err)
	}
	defer func() { assert.NoError(t, gpu.Close()) }()
	e := newEnv(t, 16<<20)
	defer tracktest.VerifyNone(t, e.tr)
	onGPU, err := pool.New(gpu, pool.Tracker(e.tr))
	require.NoError(t, err)

	_, err = gorgoniatrack.NewEngine(onGPU)
	require.ErrorIs(t, err, gorgoniatrack.ErrNotHostMemory)
	assert.Contains(t, err.Error(), "cuda:0")

	ctx := context.Background()
	logits, err := tensor.FromSlice(ctx, onGPU, []float32{1, -2, 3, -4}, 2, 2)
	require.NoError(t, err)
	host, err := tensor.ToSlice[float32](logits)
	require.NoError(t, err)
	d, err := gorgoniatrack.FromSlice(ctx, e.eng, host, 2, 2)
	require.NoError(t, err)
	abs, err := d.Apply(func(x float32) float32 { return max(x, -x) })
	require.NoError(t, err)
	back, err := tensor.FromSlice(ctx, onGPU, abs.Data().([]float32), 2, 2)
	require.NoError(t, err)
	got, err := tensor.ToSlice[float32](back)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3, 4}, got)

	devicesSeen := map[string]bool{}
	for _, a := range e.live(t) {
		devicesSeen[a.Device] = true
	}
	assert.Equal(t, map[string]bool{"host": true, "cuda:0": true}, devicesSeen, "one tracker sees both")
	for _, x := range []*tensor.Tensor{logits, back} {
		require.NoError(t, x.Free())
	}
	require.NoError(t, gorgoniatrack.Free(d))
	require.NoError(t, gorgoniatrack.Free(abs.(*gorgonia.Dense)))
}
