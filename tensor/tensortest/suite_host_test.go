package tensortest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

func TestHostDevice(t *testing.T) {
	tensortest.Run(t, func(t *testing.T, capacity int64) tensor.Device {
		d, err := tensor.NewHostDevice(capacity)
		require.NoError(t, err)
		return d
	})
}
