package foreign_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/foreign"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// foreignBuffer allocates bytes on dev as a library would, outside
// tensorlife, and counts the releases of its buffer.
func foreignBuffer(t *testing.T, dev *tensor.HostDevice, bytes int64) (foreign.Memory, *atomic.Int32) {
	t.Helper()
	p, err := dev.Alloc(bytes)
	require.NoError(t, err)
	var releases atomic.Int32
	return foreign.Memory{Device: dev, Ptr: p, Bytes: bytes, Release: func(q tensor.DevicePtr) error {
		releases.Add(1)
		return dev.Free(q, bytes)
	}}, &releases
}

//go:noinline
func adoptHere(ctx context.Context, tr *track.Tracker, mem foreign.Memory) (*tensor.Tensor, error) {
	return foreign.Adopt(ctx, tr, mem, tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{4, 64}})
}

func TestAdoptOwnsForeignMemory(t *testing.T) {
	dev, tr, _ := setup(t, 1<<20)
	mem, releases := foreignBuffer(t, dev, 1<<10)
	ctx := track.WithLabels(context.Background(), "request", "r1")
	x, err := adoptHere(ctx, tr, mem)
	require.NoError(t, err)

	assert.Equal(t, foreign.Kind, x.Kind())
	assert.Equal(t, "github.com/tensorlife/tensorlife/tensor/foreign_test.adoptHere", x.Site().Location().Function)
	v, _ := x.Labels().Get("request")
	assert.Equal(t, "r1", v)
	assert.Equal(t, int64(1<<10), tr.ReservedOn("host"), "adopted memory is tensorlife's")
	classes := tr.Books().LiveByClass()
	require.Len(t, classes, 1)
	assert.Equal(t, track.ClassStats{Device: "host", Kind: "adopted", LiveCount: 1, LiveBytes: 1 << 10}, classes[0])

	// Copies go through the device, into the foreign buffer.
	require.NoError(t, x.CopyFromHost(make([]byte, 1<<10)))

	freeThroughView(t, x, releases, dev)
	assert.Zero(t, tr.ReservedOn("host"))

	_, err = x.Ptr()
	assert.ErrorIs(t, err, tensor.ErrFreed, "use after free")
	err, panicked := invariants.Recover(x.Free)
	assert.Equal(t, invariants.Enabled, panicked)
	assert.ErrorIs(t, err, tensor.ErrDoubleFree)
	assert.Equal(t, int32(1), releases.Load(), "released exactly once")
	tracktest.VerifyNone(t, tr, tracktest.AllowMisuse())
}

// freeThroughView frees an adopted tensor x while a view of it lives, and
// checks that the foreign memory is released once, with the view.
func freeThroughView(t *testing.T, x *tensor.Tensor, releases *atomic.Int32, dev *tensor.HostDevice) {
	t.Helper()
	view, err := x.View(0, 16)
	require.NoError(t, err)
	require.NoError(t, x.Free())
	assert.Zero(t, releases.Load(), "a view still owns the memory")
	require.NoError(t, view.Free())
	assert.Equal(t, int32(1), releases.Load())
	assert.Zero(t, dev.Used())
}

func TestAdoptUntracked(t *testing.T) {
	dev, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	mem, releases := foreignBuffer(t, dev, 1<<10)
	x, err := adoptHere(context.Background(), nil, mem)
	require.NoError(t, err)
	assert.Nil(t, x.Site(), "a nil tracker makes an untracked tensor")
	freeThroughView(t, x, releases, dev)
}

func TestAdoptBadInputLeavesMemoryToCaller(t *testing.T) {
	dev, tr, _ := setup(t, 1<<20)
	mem, releases := foreignBuffer(t, dev, 256)
	defer func() { require.NoError(t, mem.Release(mem.Ptr)) }()
	spec := tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{256}}
	for _, tc := range []struct {
		name string
		mem  func(m foreign.Memory) foreign.Memory
		spec tensor.Spec
		want error
	}{
		{"nil device", func(m foreign.Memory) foreign.Memory { m.Device = nil; return m }, spec, tensor.ErrNilAllocator},
		{"nil release", func(m foreign.Memory) foreign.Memory { m.Release = nil; return m }, spec, tensor.ErrNilAllocator},
		{"zero pointer", func(m foreign.Memory) foreign.Memory { m.Ptr = 0; return m }, spec, tensor.ErrInvalidPointer},
		{"no bytes", func(m foreign.Memory) foreign.Memory { m.Bytes = 0; return m }, spec, tensor.ErrInvalidSize},
		{"shape too large", func(m foreign.Memory) foreign.Memory { return m },
			tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{65}}, tensor.ErrSizeMismatch},
		{"empty shape", func(m foreign.Memory) foreign.Memory { return m },
			tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{0}}, tensor.ErrSizeMismatch},
		{"bad shape", func(m foreign.Memory) foreign.Memory { return m },
			tensor.Spec{DType: tensor.Float32, Shape: tensor.Shape{-1}}, tensor.ErrInvalidShape},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := foreign.Adopt(context.Background(), tr, tc.mem(mem), tc.spec)
			assert.Nil(t, x)
			assert.ErrorIs(t, err, tc.want)
		})
	}
	assert.Zero(t, releases.Load(), "a failed Adopt never releases")
	assert.Zero(t, tr.ReservedOn("host"))
}

func TestAdoptReleaseErrorIsReturned(t *testing.T) {
	dev, tr, _ := setup(t, 1<<20)
	p, err := dev.Alloc(64)
	require.NoError(t, err)
	boom := errors.New("library refused")
	x, err := foreign.Adopt(context.Background(), tr, foreign.Memory{Device: dev, Ptr: p, Bytes: 64,
		Release: func(tensor.DevicePtr) error { return boom }}, tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{64}, Kind: "onnx"})
	require.NoError(t, err)
	assert.Equal(t, "onnx", x.Kind())
	err = x.Free()
	assert.ErrorIs(t, err, boom)
	var de *tensor.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, "release adopted", de.Op)
	require.NoError(t, dev.Free(p, 64))
}

//go:noinline
func dropAdopted(t *testing.T, tr *track.Tracker, mem foreign.Memory) {
	_, err := adoptHere(context.Background(), tr, mem)
	require.NoError(t, err)
}

func TestDroppedAdoptedTensorIsReclaimedOnce(t *testing.T) {
	reports := make(chan track.LeakReport, 1)
	dev, tr, _ := setupUnchecked(t, 1<<20, track.OnLeak(func(l track.LeakReport) { reports <- l }))
	mem, releases := foreignBuffer(t, dev, 1<<10)
	dropAdopted(t, tr, mem)
	got := awaitLeak(t, reports)
	assert.Equal(t, "adopted", got.Kind)
	assert.Equal(t, "github.com/tensorlife/tensorlife/tensor/foreign_test.adoptHere", got.Site.Location().Function)
	foreign.WaitReleases()
	assert.Equal(t, int32(1), releases.Load())
	assert.Zero(t, dev.Used())
}

// sizedDevice is a device that only reports its memory, as a driver might:
// total bytes, or an error.
type sizedDevice struct {
	tensor.Device
	adoptions tensor.LiveAdoptions // its adoptions are its own, as a real device's
	total     int64
	err       error
}

func (d *sizedDevice) Name() string                     { return "big" }
func (d *sizedDevice) Adoptions() *tensor.LiveAdoptions { return &d.adoptions }
func (d *sizedDevice) MemInfo() (free, total int64, err error) {
	return d.total, d.total, d.err
}

func noRelease(tensor.DevicePtr) error { return nil }

func TestAdoptValidatesAgainstTheDevice(t *testing.T) {
	ctx := context.Background()
	spec := tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{16}}
	tr, err := track.New()
	require.NoError(t, err)
	t.Cleanup(func() { tracktest.VerifyNone(t, tr) })

	t.Run("larger than the device", func(t *testing.T) {
		dev := &sizedDevice{total: 1 << 20}
		x, err := foreign.Adopt(ctx, tr, foreign.Memory{Device: dev, Ptr: 1, Bytes: 1 << 40, Release: noRelease}, spec)
		assert.Nil(t, x)
		assert.ErrorIs(t, err, tensor.ErrInvalidSize)
		assert.Contains(t, err.Error(), "total memory")
		assert.Zero(t, tr.ReservedOn("big"))
	})
	t.Run("MemInfo fails", func(t *testing.T) {
		broken := errors.New("driver gone")
		_, err := foreign.Adopt(ctx, tr, foreign.Memory{Device: &sizedDevice{err: broken}, Ptr: 1, Bytes: 16, Release: noRelease}, spec)
		assert.ErrorIs(t, err, broken)
		var de *tensor.DeviceError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, "meminfo", de.Op)
	})
	t.Run("adoptions never add up past the device", func(t *testing.T) {
		// Two adoptions of 2^62 bytes once wrapped ReservedOn to -2^63.
		dev := &sizedDevice{total: math.MaxInt64}
		mem := foreign.Memory{Device: dev, Ptr: 1 << 62, Bytes: 1 << 62, Release: noRelease}
		x, err := foreign.Adopt(ctx, tr, mem, spec)
		require.NoError(t, err)
		mem.Ptr = 2 << 62
		mem.Bytes = 1<<62 + 1<<61 // fits the device alone, not with the first
		y, err := foreign.Adopt(ctx, tr, mem, spec)
		assert.Nil(t, y)
		assert.ErrorIs(t, err, tensor.ErrInvalidSize)
		assert.Equal(t, int64(1<<62), tr.ReservedOn("big"))
		require.NoError(t, x.Free())
		assert.Zero(t, tr.ReservedOn("big"))
		// Once the first is released the second fits.
		y, err = foreign.Adopt(ctx, tr, mem, spec)
		require.NoError(t, err)
		require.NoError(t, y.Free())
	})
	t.Run("a device that keeps no record of its adoptions", func(t *testing.T) {
		dev := plainDevice{total: 1 << 20}
		x, err := foreign.Adopt(ctx, tr, foreign.Memory{Device: dev, Ptr: 1, Bytes: 16, Release: noRelease}, spec)
		require.NoError(t, err, "the overlap check is skipped, nothing panics")
		y, err := foreign.Adopt(ctx, tr, foreign.Memory{Device: dev, Ptr: 1, Bytes: 16, Release: noRelease}, spec)
		require.NoError(t, err, "nothing to check the memory against")
		_, err = foreign.Adopt(ctx, tr, foreign.Memory{Device: dev, Ptr: 1, Bytes: 2 << 20, Release: noRelease}, spec)
		assert.ErrorIs(t, err, tensor.ErrInvalidSize, "the device's total memory still bounds one adoption")
		require.NoError(t, x.Free())
		require.NoError(t, y.Free())
	})
}

// plainDevice is a device value of no pointer and no LiveAdoptions, not
// even comparable.
type plainDevice struct {
	tensor.Device
	total int64
	_     []string // a slice field: the struct is not comparable
}

func (d plainDevice) Name() string                          { return "plain" }
func (d plainDevice) MemInfo() (free, total int64, e error) { return d.total, d.total, nil }

func TestAdoptRefusesMemoryAdoptedTwice(t *testing.T) {
	ctx := context.Background()
	spec := tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{16}}
	dev, tr, _ := setup(t, 1<<20)
	other, err := track.New()
	require.NoError(t, err)
	var releases atomic.Int32
	release := func(tensor.DevicePtr) error { releases.Add(1); return nil }
	first := foreign.Memory{Device: dev, Ptr: 1 << 20, Bytes: 256, Release: release}
	x, err := foreign.Adopt(ctx, tr, first, spec)
	require.NoError(t, err)

	for _, tc := range []struct {
		name    string
		tracker *track.Tracker
		ptr     tensor.DevicePtr
		bytes   int64
	}{
		{"same pointer", tr, first.Ptr, 256},
		{"same pointer, other tracker", other, first.Ptr, 16},
		{"same pointer, untracked", nil, first.Ptr, 16},
		{"inside", tr, first.Ptr + 16, 16},
		{"overlapping the end", tr, first.Ptr + 255, 16},
		{"overlapping the start", tr, first.Ptr - 8, 16},
		{"covering", tr, first.Ptr - 8, 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y, err := foreign.Adopt(ctx, tc.tracker, foreign.Memory{Device: dev, Ptr: tc.ptr, Bytes: tc.bytes, Release: release}, spec)
			assert.Nil(t, y)
			assert.ErrorIs(t, err, foreign.ErrAlreadyAdopted)
			assert.ErrorIs(t, err, tensor.ErrInvalidPointer)
		})
	}
	assert.Equal(t, int64(256), tr.ReservedOn("host"))

	// Adjacent memory and the same address on another device are distinct.
	next, err := foreign.Adopt(ctx, tr, foreign.Memory{Device: dev, Ptr: first.Ptr + 256, Bytes: 16, Release: release}, spec)
	require.NoError(t, err)
	dev2, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	elsewhere, err := foreign.Adopt(ctx, tr, foreign.Memory{Device: dev2, Ptr: first.Ptr, Bytes: 16, Release: release}, spec)
	require.NoError(t, err)

	require.NoError(t, x.Free())
	again, err := foreign.Adopt(ctx, tr, first, spec)
	require.NoError(t, err, "released memory may be adopted again")
	for _, h := range []*tensor.Tensor{next, elsewhere, again} {
		require.NoError(t, h.Free())
	}
	assert.Equal(t, int32(4), releases.Load(), "each adoption released once; the refused ones never")
}
