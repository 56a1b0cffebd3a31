package devices_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/devices"
	"github.com/tensorlife/tensorlife/tensor"
)

func TestHostDevice(t *testing.T) {
	devices.Run(t, func(t *testing.T, capacity int64) tensor.Device {
		d, err := tensor.NewHostDevice(capacity)
		require.NoError(t, err)
		return d
	})
}
