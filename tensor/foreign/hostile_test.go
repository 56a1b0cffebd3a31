package foreign_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/foreign"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// hugeDevice says it has all the memory there is, and keeps no record of
// its adoptions: only the books stand between two huge adoptions and a
// wrapped total.
type hugeDevice struct{}

func (hugeDevice) Name() string                                { return "huge" }
func (hugeDevice) Alloc(int64) (tensor.DevicePtr, error)       { return 0, errors.New("no") }
func (hugeDevice) Free(tensor.DevicePtr, int64) error          { return nil }
func (hugeDevice) MemInfo() (int64, int64, error)              { return math.MaxInt64, math.MaxInt64, nil }
func (hugeDevice) CopyToDevice(tensor.DevicePtr, []byte) error { return nil }
func (hugeDevice) CopyToHost([]byte, tensor.DevicePtr) error   { return nil }
func (hugeDevice) Memset(tensor.DevicePtr, byte, int64) error  { return nil }

// Adoptions past MaxInt64 on one device saturate the books, never wrap
// them, and come back down exactly as they are released.
func TestAdoptionTotalsSaturate(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	spec := tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{1}}
	release := func(tensor.DevicePtr) error { return nil }
	var held []*tensor.Tensor
	for _, tc := range []struct {
		name string
		want int64
	}{
		{"one of 2^62", 1 << 62},
		{"two of 2^62", math.MaxInt64},
		{"three of 2^62", math.MaxInt64},
		{"four of 2^62: 2^64, past what 64 bits hold", math.MaxInt64},
	} {
		x, err := foreign.Adopt(context.Background(), tr,
			foreign.Memory{Device: hugeDevice{}, Ptr: tensor.DevicePtr(len(held)+1) << 40, Bytes: 1 << 62, Release: release}, spec)
		require.NoError(t, err, tc.name)
		held = append(held, x)
		assert.Equal(t, tc.want, tr.ReservedOn("huge"), tc.name)
		st := foreign.Adoptions(tr)
		require.Len(t, st, 1)
		assert.Equal(t, tc.want, st[0].Reserved, tc.name)
		assert.Equal(t, tc.want, st[0].Peak, tc.name)
	}
	for i, want := range []int64{math.MaxInt64, math.MaxInt64, 1 << 62, 0} {
		require.NoError(t, held[i].Free())
		assert.Equal(t, want, tr.ReservedOn("huge"), "after %d releases", i+1)
	}
	assert.Equal(t, int64(math.MaxInt64), foreign.Adoptions(tr)[0].Peak)
	tracktest.VerifyNone(t, tr)
}

// A device whose Name or MemInfo panics fails Adopt with an error, and the
// memory stays the caller's; a release that panics is counted on the
// tracker.
func TestAdoptSurvivesHostileCode(t *testing.T) {
	spec := tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{16}}
	for _, method := range []string{"Name", "MemInfo"} {
		t.Run(method, func(t *testing.T) {
			host, err := tensor.NewHostDevice(1 << 20)
			require.NoError(t, err)
			tr, err := track.New(track.Logger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			released := false
			var x *tensor.Tensor
			require.NotPanics(t, func() {
				x, err = foreign.Adopt(context.Background(), tr, foreign.Memory{Device: tensortest.NewHostile(host, method),
					Ptr: 1 << 20, Bytes: 64, Release: func(tensor.DevicePtr) error { released = true; return nil }}, spec)
			})
			assert.Nil(t, x)
			require.ErrorIs(t, err, tensor.ErrPanic)
			var de *tensor.DeviceError
			require.ErrorAs(t, err, &de)
			assert.False(t, released, "the memory stays the caller's")
			assert.EqualValues(t, 1, tr.Totals().PartPanics)
			assert.Zero(t, tr.ReservedOn("host"))
		})
	}
	t.Run("Release", func(t *testing.T) {
		dev, tr, _ := setup(t, 1<<20, track.Logger(slog.New(slog.DiscardHandler)))
		mem, _ := foreignBuffer(t, dev, 64)
		inner := mem.Release
		mem.Release = func(p tensor.DevicePtr) error {
			_ = inner(p)
			panic("hostile release")
		}
		x, err := foreign.Adopt(context.Background(), tr, mem, spec)
		require.NoError(t, err)
		require.NotPanics(t, func() { err = x.Free() })
		require.ErrorIs(t, err, foreign.ErrPanic)
		assert.ErrorIs(t, err, tensor.ErrPanic)
		assert.EqualValues(t, 1, tr.Totals().PartPanics)
		assert.Zero(t, tr.ReservedOn("host"), "nothing counted twice: the memory left the books once")
	})
}
