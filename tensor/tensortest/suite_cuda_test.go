//go:build cuda

package tensortest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/cu"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/cuda"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

// The suite on every CUDA device present, each capped at the suite's
// capacity so that MemInfo moves with the suite's allocations only, even on
// a GPU other processes share. CI runs it on the fake driver with two
// devices (scripts/fakecuda.sh), the GPU check on the real ones. Every
// device the environment configures the fake driver with must be there.
func TestCUDADevices(t *testing.T) {
	n, err := cu.NumDevices()
	require.NoError(t, err)
	if n == 0 {
		tensortest.NoDevice(t, 0, "no CUDA device")
	}
	for ordinal := range max(n, tensortest.FakeCUDADevices()) {
		t.Run(fmt.Sprintf("cuda:%d", ordinal), func(t *testing.T) {
			tensortest.Run(t, func(t *testing.T, capacity int64) tensor.Device {
				return openCUDA(t, ordinal, cuda.WithMemoryLimit(capacity))
			})
		})
	}
}

// The suite on the driver's own accounting, with no cap: out-of-memory comes
// from cuMemAlloc and free memory from cuMemGetInfo. On a real GPU the
// driver's own allocations move free memory too, so this runs on the fake
// driver only.
func TestCUDADriverAccounting(t *testing.T) {
	dev, err := cu.GetDevice(0)
	if err != nil {
		tensortest.NoDevice(t, 0, "no CUDA device: %v", err)
	}
	name, err := dev.Name()
	require.NoError(t, err)
	if !strings.HasPrefix(name, "tensorlife fakecuda") {
		tensortest.NotFakeDriver(t, name)
	}
	tensortest.Run(t, func(t *testing.T, _ int64) tensor.Device {
		return openCUDA(t, 0)
	})
}

func openCUDA(t *testing.T, ordinal int, opts ...cuda.Option) *cuda.Device {
	d, err := cuda.Open(ordinal, opts...)
	if err != nil {
		tensortest.NoDevice(t, ordinal, "no CUDA device %d: %v", ordinal, err)
	}
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}
