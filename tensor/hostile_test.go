package tensor_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
)

// Every call a DeviceAllocator or a tensor makes into its device runs under
// recover: a method that panics fails its one call with a *DeviceError
// matching ErrPanic, counted once on the tracker, and the books count only
// what happened.
func TestDeviceCallsSurviveAHostileDevice(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		method string
		op     string
		call   func(a *tensor.DeviceAllocator, x *tensor.Tensor) error
		// reserved is what the allocator holds after the call, of the 64
		// bytes x holds.
		reserved int64
	}{
		{"Alloc", "alloc", func(a *tensor.DeviceAllocator, _ *tensor.Tensor) error {
			_, err := tensor.New(ctx, a, tensor.Uint8, 32)
			return err
		}, 64},
		{"Free", "free", func(_ *tensor.DeviceAllocator, x *tensor.Tensor) error { return x.Free() }, 64},
		{"CopyToDevice", "copy to device", func(_ *tensor.DeviceAllocator, x *tensor.Tensor) error {
			return x.CopyFromHost(make([]byte, 64))
		}, 64},
		{"CopyToHost", "copy to host", func(_ *tensor.DeviceAllocator, x *tensor.Tensor) error {
			_, err := tensor.ToSlice[uint8](x)
			return err
		}, 64},
		{"Memset", "memset", func(_ *tensor.DeviceAllocator, x *tensor.Tensor) error { return x.Fill(1) }, 64},
	} {
		t.Run(tc.method, func(t *testing.T) {
			host, err := tensor.NewHostDevice(1 << 20)
			require.NoError(t, err)
			dev := tensortest.NewHostile(host)
			tr, err := track.New(track.Logger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			a, err := tensor.NewDeviceAllocator(dev, tr)
			require.NoError(t, err)
			x, err := tensor.New(ctx, a, tensor.Uint8, 64)
			require.NoError(t, err)
			before := a.Stats()

			dev.Panic(tc.method)
			require.NotPanics(t, func() { err = tc.call(a, x) })
			require.ErrorIs(t, err, tensor.ErrPanic)
			var de *tensor.DeviceError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, tc.op, de.Op)
			assert.EqualValues(t, 1, tr.Totals().PartPanics)
			after := a.Stats()
			assert.Equal(t, tc.reserved, after.Reserved, "an allocation rolled back, a free not counted")
			assert.Equal(t, before.Allocs, after.Allocs)
			assert.Equal(t, before.Frees, after.Frees)
			dev.Panic()
			if tc.method == "Free" {
				// The record is released; the block stays counted, since
				// the device may not have freed it.
				assert.Zero(t, tr.Totals().LiveCount)
				return
			}
			assert.EqualValues(t, 1, tr.Totals().LiveCount, "only x is live")
			require.NoError(t, x.Free())
			assert.Zero(t, host.Used(), "nothing left on the device")
			assert.Zero(t, a.Stats().Reserved)
		})
	}
	t.Run("Name at NewDeviceAllocator", func(t *testing.T) {
		host, err := tensor.NewHostDevice(1 << 20)
		require.NoError(t, err)
		var a *tensor.DeviceAllocator
		require.NotPanics(t, func() { a, err = tensor.NewDeviceAllocator(tensortest.NewHostile(host, "Name"), nil) })
		assert.Nil(t, a)
		assert.ErrorIs(t, err, tensor.ErrPanic)
	})
	t.Run("Name after NewDeviceAllocator", func(t *testing.T) {
		// New takes the name the allocator read when it was made, and
		// calls no Name.
		host, err := tensor.NewHostDevice(1 << 20)
		require.NoError(t, err)
		dev := tensortest.NewHostile(host)
		tr, err := track.New(track.Logger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err)
		a, err := tensor.NewDeviceAllocator(dev, tr)
		require.NoError(t, err)
		dev.Panic("Name")
		x, err := tensor.New(ctx, a, tensor.Uint8, 32)
		require.NoError(t, err)
		assert.Equal(t, []string{host.Name()}, liveDevices(tr))
		assert.Zero(t, dev.Panicked())
		assert.Zero(t, tr.Totals().PartPanics)
		require.NoError(t, x.Free())
	})
	t.Run("MemInfo on Headroom", func(t *testing.T) {
		host, err := tensor.NewHostDevice(1 << 20)
		require.NoError(t, err)
		a, err := tensor.NewDeviceAllocator(tensortest.NewHostile(host, "MemInfo"), nil)
		require.NoError(t, err)
		budget, left := a.Headroom()
		assert.Zero(t, budget)
		assert.EqualValues(t, -1, left)
	})
}

// reDevice is an allocator of the user's own that embeds a DeviceAllocator
// and allocates from it, but names another device: New reads that
// device's name, under recover, since the DeviceAllocator's own name is
// not its.
type reDevice struct {
	*tensor.DeviceAllocator
	dev tensor.Device
}

func (r reDevice) Device() tensor.Device { return r.dev }

// New reads the device name of an allocator it does not own on every
// tensor, under recover: a Name that panics fails that New with a
// *DeviceError matching ErrPanic, counted once, and the block is given
// back.
func TestNewReadsAForeignAllocatorsDeviceNameUnderRecover(t *testing.T) {
	ctx := context.Background()
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	tr, err := track.New(track.Logger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	inner, err := tensor.NewDeviceAllocator(host, tr)
	require.NoError(t, err)
	other, err := tensor.NewHostDevice(1<<20, tensor.DeviceName("host:1"))
	require.NoError(t, err)
	named := tensortest.NewHostile(other)
	a := reDevice{DeviceAllocator: inner, dev: named}

	x, err := tensor.New(ctx, a, tensor.Uint8, 32)
	require.NoError(t, err)
	assert.Equal(t, []string{"host:1"}, liveDevices(tr), "the name of the device it says, not its inner allocator's")
	require.NoError(t, x.Free())

	named.Panic("Name")
	before := inner.Stats()
	require.NotPanics(t, func() { _, err = tensor.New(ctx, a, tensor.Uint8, 32) })
	require.ErrorIs(t, err, tensor.ErrPanic)
	var de *tensor.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "name", de.Op)
	assert.EqualValues(t, 1, tr.Totals().PartPanics)
	after := inner.Stats()
	assert.Equal(t, before.Allocs+1, after.Allocs, "allocated before the name was read")
	assert.Equal(t, before.Frees+1, after.Frees, "and given back")
	assert.Zero(t, after.Reserved)
	assert.Zero(t, tr.Totals().LiveCount)
}

// liveDevices returns the devices of tr's live tensors, as recorded.
func liveDevices(tr *track.Tracker) []string {
	var names []string
	for _, c := range tr.Books().LiveByClass() {
		names = append(names, c.Device)
	}
	return names
}
