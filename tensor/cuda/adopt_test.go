package cuda

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/foreign"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// The device keeps its own live adoptions (it embeds foreign.LiveAdoptions):
// memory a library allocated on it is adopted once, in any tracker.
func TestDeviceKeepsItsAdoptions(t *testing.T) {
	d, _ := openFake(t, 1<<20)
	tr, err := track.New()
	require.NoError(t, err)
	t.Cleanup(func() { tracktest.VerifyNone(t, tr) })
	p, err := d.Alloc(256)
	require.NoError(t, err)
	var released int
	mem := foreign.Memory{Device: d, Ptr: p, Bytes: 256, Release: func(q tensor.DevicePtr) error {
		released++
		return d.Free(q, 256)
	}}
	spec := tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{256}}
	x, err := foreign.Adopt(context.Background(), tr, mem, spec)
	require.NoError(t, err)

	_, err = foreign.Adopt(context.Background(), nil, mem, spec)
	assert.ErrorIs(t, err, foreign.ErrAlreadyAdopted, "the device remembers the adoption")
	assert.Equal(t, int64(256), tr.ReservedOn("cuda:0"))

	require.NoError(t, x.Free())
	assert.Equal(t, 1, released)
	assert.Zero(t, tr.ReservedOn("cuda:0"))
}
