package tensor_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/invariants"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// setup returns a host device, a fresh tracker and an allocator over both,
// and checks when the test ends that every tensor was freed.
func setup(t *testing.T, capacity int64, opts ...track.Option) (*tensor.HostDevice, *track.Tracker, *tensor.DeviceAllocator) {
	t.Helper()
	dev, tr, alloc := setupUnchecked(t, capacity, opts...)
	t.Cleanup(func() { tracktest.VerifyNone(t, tr) })
	return dev, tr, alloc
}

// setupUnchecked is setup for tests that leak on purpose.
func setupUnchecked(t *testing.T, capacity int64, opts ...track.Option) (*tensor.HostDevice, *track.Tracker, *tensor.DeviceAllocator) {
	t.Helper()
	dev, err := tensor.NewHostDevice(capacity)
	require.NoError(t, err)
	tr, err := track.New(opts...)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	return dev, tr, alloc
}

func TestNewRecordsAndFreeReleases(t *testing.T) {
	dev, tr, alloc := setup(t, 1<<20)
	ctx := track.WithLabels(context.Background(), "request", "r1")

	x, err := tensor.New(ctx, alloc, tensor.Float32, 2, 3)
	require.NoError(t, err)
	assert.Equal(t, tensor.Float32, x.DType())
	assert.Equal(t, tensor.Shape{2, 3}, x.Shape())
	assert.EqualValues(t, 24, x.Bytes())
	assert.Equal(t, "host", x.Device().Name())
	assert.Equal(t, tensor.DefaultKind, x.Kind())
	assert.EqualValues(t, 24, dev.Used())

	snap := tr.Snapshot()
	require.Len(t, snap.Allocations, 1)
	a := snap.Allocations[0]
	assert.Equal(t, x.ID(), a.ID)
	assert.Equal(t, "float32", a.DType)
	assert.Equal(t, []int{2, 3}, a.Shape)
	assert.Equal(t, "host", a.Device)
	v, _ := a.Labels.Get("request")
	assert.Equal(t, "r1", v)
	assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.TestNewRecordsAndFreeReleases", a.Site.Location().Function)
	assert.True(t, strings.HasSuffix(a.Site.Location().File, "tensor_test.go"))

	require.NoError(t, x.Free())
	assert.EqualValues(t, 0, dev.Used())
	assert.EqualValues(t, 0, tr.Totals().LiveCount)
	assert.EqualValues(t, 1, tr.Totals().Frees)
}

func TestFreedTensorAnswersErrFreed(t *testing.T) {
	_, tr, alloc := setupUnchecked(t, 1<<20)
	t.Cleanup(func() { tracktest.VerifyNone(t, tr, tracktest.AllowMisuse()) }) // uses after free on purpose
	x, err := tensor.New(context.Background(), alloc, tensor.Int32, 4)
	require.NoError(t, err)
	require.NoError(t, x.Free())

	assert.True(t, x.Freed())
	_, err = x.Ptr()
	assert.ErrorIs(t, err, tensor.ErrFreed)
	assert.ErrorIs(t, x.CopyFromHost(make([]byte, 16)), tensor.ErrFreed)
	assert.ErrorIs(t, x.CopyToHost(make([]byte, 16)), tensor.ErrFreed)
	assert.ErrorIs(t, x.Fill(0), tensor.ErrFreed)
	_, err = x.Retain()
	assert.ErrorIs(t, err, tensor.ErrFreed)
	_, err = tensor.ToSlice[int32](x)
	assert.ErrorIs(t, err, tensor.ErrFreed)
	// Metadata stays readable for error messages.
	assert.Contains(t, x.String(), "int32[4]")
	assert.Contains(t, x.String(), "freed")
	var nilTensor *tensor.Tensor
	assert.ErrorIs(t, nilTensor.Free(), tensor.ErrFreed)

	// Each use was noted as misuse, at the line of the use.
	ms, _, _ := tr.Books().MisuseSince(0)
	require.Len(t, ms, 6, "Ptr, CopyFromHost, CopyToHost, Fill, Retain, ToSlice")
	for _, m := range ms {
		assert.Equal(t, track.EventUseAfterFree, m.Kind)
		assert.Equal(t, x.ID(), m.ID)
		require.NotNil(t, m.Use)
		assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.TestFreedTensorAnswersErrFreed", m.Use.Location().Function)
		require.NotNil(t, m.FirstFree)
		assert.Equal(t, m.Use.Location().Function, m.FirstFree.Location().Function)
	}
	assert.EqualValues(t, 6, tr.Totals().Event(track.EventUseAfterFree))
}

func useFreed(x *tensor.Tensor) error { return x.Fill(1) }

func TestUseAfterFreeFailsTheCheck(t *testing.T) {
	_, tr, alloc := setupUnchecked(t, 1<<20)
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 8)
	require.NoError(t, err)
	freeOnce(t, x)
	require.ErrorIs(t, useFreed(x), tensor.ErrFreed)

	err = tracktest.Find(tr)
	require.ErrorIs(t, err, tracktest.ErrMisuse, "a use after free fails the check")
	msg := err.Error()
	assert.Contains(t, msg, "1 use(s) after free")
	assert.Contains(t, msg, "used after free")
	assert.Contains(t, msg, "used at: github.com/tensorlife/tensorlife/tensor_test.useFreed")
	assert.Contains(t, msg, "first freed at: github.com/tensorlife/tensorlife/tensor_test.freeOnce")
	assert.Contains(t, msg, "allocated at: github.com/tensorlife/tensorlife/tensor_test.TestUseAfterFreeFailsTheCheck")

	require.ErrorIs(t, useFreed(x), tensor.ErrFreed)
	assert.NoError(t, tracktest.Find(tr, tracktest.AllowMisuse()), "AllowMisuse lets it pass")
}

func freeOnce(t *testing.T, x *tensor.Tensor) { require.NoError(t, x.Free()) }

func freeAgain(x *tensor.Tensor) error { return x.Free() }

func TestDoubleFreeNamesBothSites(t *testing.T) {
	_, tr, alloc := setupUnchecked(t, 1<<20, track.KeepHistory(64))
	t.Cleanup(func() { tracktest.VerifyNone(t, tr, tracktest.AllowMisuse()) }) // double frees on purpose
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 8)
	require.NoError(t, err)
	freeOnce(t, x)

	err, panicked := invariants.Recover(func() error { return freeAgain(x) })
	assert.Equal(t, invariants.Enabled, panicked, "a double free panics in invariants builds")
	require.ErrorIs(t, err, tensor.ErrDoubleFree)
	var dfe *tensor.DoubleFreeError
	require.ErrorAs(t, err, &dfe)
	assert.Equal(t, x.ID(), dfe.ID)
	assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.TestDoubleFreeNamesBothSites", dfe.Allocated.Location().Function)
	assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.freeOnce", dfe.FirstFree.Location().Function)
	assert.Contains(t, err.Error(), "TestDoubleFreeNamesBothSites")
	assert.Contains(t, err.Error(), "freeOnce")
	assert.EqualValues(t, 1, tr.Totals().Event(track.EventDoubleFree))
	assert.EqualValues(t, 1, tr.Totals().Misuse)
	assert.EqualValues(t, 0, tr.Totals().LiveCount, "a double free must not release twice")

	// The tracker keeps all three lines; the history event names the
	// second Free's.
	ms, lost, _ := tr.Books().MisuseSince(0)
	require.Len(t, ms, 1)
	assert.Zero(t, lost)
	assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.freeAgain", ms[0].SecondFree.Location().Function)
	assert.Equal(t, dfe.FirstFree, ms[0].FirstFree)
	assert.Equal(t, x.ID(), ms[0].ID)
	h, err := tr.History()
	require.NoError(t, err)
	var second *track.Site
	for _, e := range h.Events {
		if e.Kind == track.EventDoubleFree {
			second = e.Site
		}
	}
	require.NotNil(t, second, "the double free is in the history")
	assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.freeAgain", second.Location().Function)
}

func TestRetainKeepsMemoryUntilLastOwner(t *testing.T) {
	dev, tr, alloc := setup(t, 1<<20)
	x, err := tensor.FromSlice(context.Background(), alloc, []float32{1, 2, 3})
	require.NoError(t, err)
	y, err := x.Retain()
	require.NoError(t, err)
	assert.Equal(t, x.ID(), y.ID())

	require.NoError(t, x.Free())
	assert.EqualValues(t, 12, dev.Used(), "memory stays while an owner remains")
	got, err := tensor.ToSlice[float32](y)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, got)
	assert.EqualValues(t, 1, tr.Totals().LiveCount)

	require.NoError(t, y.Free())
	assert.EqualValues(t, 0, dev.Used())
	assert.EqualValues(t, 0, tr.Totals().LiveCount)
}

func TestCopiesRoundTrip(t *testing.T) {
	_, _, alloc := setup(t, 1<<20)
	ctx := context.Background()
	tests := []struct {
		name string
		make func() (*tensor.Tensor, error)
		read func(*tensor.Tensor) (any, error)
		want any
	}{
		{"bool", func() (*tensor.Tensor, error) { return tensor.FromSlice(ctx, alloc, []bool{true, false, true}) },
			func(x *tensor.Tensor) (any, error) { return tensor.ToSlice[bool](x) }, []bool{true, false, true}},
		{"int64 2x2", func() (*tensor.Tensor, error) { return tensor.FromSlice(ctx, alloc, []int64{1, -2, 3, -4}, 2, 2) },
			func(x *tensor.Tensor) (any, error) { return tensor.ToSlice[int64](x) }, []int64{1, -2, 3, -4}},
		{"float64", func() (*tensor.Tensor, error) { return tensor.FromSlice(ctx, alloc, []float64{0.5, 1e300}) },
			func(x *tensor.Tensor) (any, error) { return tensor.ToSlice[float64](x) }, []float64{0.5, 1e300}},
		{"int8", func() (*tensor.Tensor, error) { return tensor.FromSlice(ctx, alloc, []int8{-128, 127}) },
			func(x *tensor.Tensor) (any, error) { return tensor.ToSlice[int8](x) }, []int8{-128, 127}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := tt.make()
			require.NoError(t, err)
			defer freeOnce(t, x)
			got, err := tt.read(x)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	t.Run("ranges and fill", func(t *testing.T) {
		x, err := tensor.New(ctx, alloc, tensor.Uint8, 8)
		require.NoError(t, err)
		defer freeOnce(t, x)
		require.NoError(t, x.Fill(7))
		require.NoError(t, x.CopyFromHostAt(2, []byte{1, 2, 3}))
		out := make([]byte, 8)
		require.NoError(t, x.CopyToHost(out))
		assert.Equal(t, []byte{7, 7, 1, 2, 3, 7, 7, 7}, out)
		part := make([]byte, 2)
		require.NoError(t, x.CopyToHostAt(3, part))
		assert.Equal(t, []byte{2, 3}, part)
	})
}

func TestBadInput(t *testing.T) {
	_, tr, alloc := setup(t, 1024)
	ctx := context.Background()
	x, err := tensor.New(ctx, alloc, tensor.Float32, 4)
	require.NoError(t, err)
	defer freeOnce(t, x)

	var nilAlloc *tensor.DeviceAllocator
	tests := []struct {
		name string
		err  func() error
		want error
	}{
		{"negative dim", func() error { _, err := tensor.New(ctx, alloc, tensor.Float32, 2, -1); return err }, tensor.ErrInvalidShape},
		{"overflowing dims", func() error {
			_, err := tensor.New(ctx, alloc, tensor.Float32, 1<<40, 1<<40)
			return err
		}, tensor.ErrInvalidShape},
		{"overflowing bytes", func() error { _, err := tensor.New(ctx, alloc, tensor.Float64, 1<<61); return err }, tensor.ErrInvalidShape},
		{"unknown dtype", func() error { _, err := tensor.New(ctx, alloc, tensor.DType(200), 2); return err }, tensor.ErrInvalidDType},
		{"invalid dtype zero", func() error { _, err := tensor.New(ctx, alloc, tensor.InvalidDType, 2); return err }, tensor.ErrInvalidDType},
		{"nil allocator", func() error { _, err := tensor.New(ctx, nil, tensor.Float32, 2); return err }, tensor.ErrNilAllocator},
		{"typed nil allocator", func() error { _, err := tensor.New(ctx, nilAlloc, tensor.Float32, 2); return err }, tensor.ErrNilAllocator},
		{"past capacity", func() error { _, err := tensor.New(ctx, alloc, tensor.Uint8, 2048); return err }, tensor.ErrOutOfMemory},
		{"short copy", func() error { return x.CopyFromHost(make([]byte, 15)) }, tensor.ErrSizeMismatch},
		{"long copy", func() error { return x.CopyToHost(make([]byte, 17)) }, tensor.ErrSizeMismatch},
		{"range past end", func() error { return x.CopyFromHostAt(12, make([]byte, 8)) }, tensor.ErrSizeMismatch},
		{"negative offset", func() error { return x.CopyToHostAt(-1, make([]byte, 1)) }, tensor.ErrSizeMismatch},
		{"wrong element type", func() error { _, err := tensor.ToSlice[int32](x); return err }, tensor.ErrInvalidDType},
		{"slice shape mismatch", func() error { _, err := tensor.FromSlice(ctx, alloc, []int32{1, 2, 3}, 2, 2); return err }, tensor.ErrSizeMismatch},
		{"parse dtype", func() error { _, err := tensor.ParseDType("float8"); return err }, tensor.ErrInvalidDType},
		{"nil device", func() error { _, err := tensor.NewDeviceAllocator(nil, nil); return err }, tensor.ErrNilAllocator},
		{"zero capacity", func() error { _, err := tensor.NewHostDevice(0); return err }, tensor.ErrInvalidSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, tt.err(), tt.want)
		})
	}
	assert.EqualValues(t, 1, tr.Totals().LiveCount, "failed calls must not leave records")
	assert.EqualValues(t, 1, tr.Totals().Event(track.EventOOM))
}

func TestZeroSizeTensorHoldsNoMemory(t *testing.T) {
	dev, tr, alloc := setup(t, 1024)
	x, err := tensor.New(context.Background(), alloc, tensor.Float32, 0, 16)
	require.NoError(t, err)
	assert.EqualValues(t, 0, x.Bytes())
	assert.Equal(t, 0, dev.Blocks())
	assert.EqualValues(t, 1, tr.Totals().LiveCount, "an empty tensor is still an owned handle")
	require.NoError(t, x.CopyFromHost(nil))
	require.NoError(t, x.Free())
	assert.EqualValues(t, 0, tr.Totals().LiveCount)

	s, err := tensor.New(context.Background(), alloc, tensor.Float64) // a scalar
	require.NoError(t, err)
	assert.EqualValues(t, 8, s.Bytes())
	require.NoError(t, s.Free())
}

func TestForeignBlockAndTracker(t *testing.T) {
	dev, _, a1 := setup(t, 1024)
	a2, err := tensor.NewDeviceAllocator(dev, nil)
	require.NoError(t, err)
	b, err := a1.Allocate(64)
	require.NoError(t, err)
	assert.ErrorIs(t, a2.Release(b), tensor.ErrForeignBlock)
	require.NoError(t, a1.Release(b))
	_, err = a1.Allocate(0)
	assert.ErrorIs(t, err, tensor.ErrInvalidSize)
}

func TestUntrackedAllocator(t *testing.T) {
	dev, err := tensor.NewHostDevice(1024)
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(dev, nil)
	require.NoError(t, err)
	x, err := tensor.New(context.Background(), alloc, tensor.Int64, 2)
	require.NoError(t, err)
	assert.Nil(t, x.Site())
	assert.NotZero(t, x.ID())
	require.NoError(t, x.Free())
	err, _ = invariants.Recover(x.Free)
	assert.ErrorIs(t, err, tensor.ErrDoubleFree)
	assert.Contains(t, err.Error(), "untracked")
}

// leakOne makes a tensor and drops it without Free.
//
//go:noinline
func leakOne(t *testing.T, alloc tensor.Allocator) uint64 {
	x, err := tensor.New(context.Background(), alloc, tensor.Bool, 32, 32)
	require.NoError(t, err)
	return x.ID()
}

// awaitLeak runs the garbage collector until a leak report arrives on
// reports, and returns it.
func awaitLeak(t *testing.T, reports <-chan track.LeakReport) track.LeakReport {
	t.Helper()
	var got track.LeakReport
	require.Eventually(t, func() bool {
		runtime.GC()
		select {
		case got = <-reports:
			return true
		default:
			return false
		}
	}, 5*time.Second, 10*time.Millisecond)
	return got
}

func TestGarbageCollectedTensorIsReportedAsLeak(t *testing.T) {
	for _, reclaim := range []bool{true, false} {
		t.Run(map[bool]string{true: "reclaim", false: "keep"}[reclaim], func(t *testing.T) {
			reports := make(chan track.LeakReport, 1)
			dev, tr, alloc := setupUnchecked(t, 1<<20, track.OnLeak(func(l track.LeakReport) { reports <- l }), track.ReclaimLeaks(reclaim))
			id := leakOne(t, alloc)

			got := awaitLeak(t, reports)

			assert.Equal(t, id, got.ID)
			assert.EqualValues(t, 1024, got.Bytes)
			assert.Equal(t, reclaim, got.Reclaimed)
			assert.Equal(t, "github.com/tensorlife/tensorlife/tensor_test.leakOne", got.Site.Location().Function)
			assert.EqualValues(t, 1, tr.Totals().GCLeaks)
			if reclaim {
				require.Eventually(t, func() bool { return dev.Used() == 0 }, time.Second, time.Millisecond)
				assert.EqualValues(t, 0, tr.Totals().LiveCount)
			} else {
				assert.EqualValues(t, 1024, dev.Used())
				snap, err := tr.SnapshotOf(track.Filter{LeakedOnly: true, Allocations: true})
				require.NoError(t, err)
				require.Len(t, snap.Allocations, 1)
				assert.True(t, snap.Allocations[0].Leaked)
			}
		})
	}
}

// oomStep allocates from one line, so the OOM report below names it.
//
//go:noinline
func oomStep(t *testing.T, alloc tensor.Allocator) *tensor.Tensor {
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 1<<20)
	require.NoError(t, err)
	return x
}

func TestOOMErrorText(t *testing.T) {
	_, tr, alloc := setup(t, 8<<20)
	var held []*tensor.Tensor
	for range 3 {
		held = append(held, oomStep(t, alloc))
	}
	err := error(&tensor.OOMError{Device: "cuda:0", Requested: 1 << 20, Limit: 1 << 30, Reason: "budget",
		Reserved: 1 << 30, Active: 1 << 29, Cached: 1 << 29, DeviceFree: -1, TopSites: tr.SiteTotals()})
	assert.True(t, errors.Is(err, tensor.ErrOutOfMemory))
	assert.Contains(t, err.Error(), "requested 1 MiB, budget limit 1 GiB")
	assert.Regexp(t, `1\. 3 MiB in 3 tensors: github.com/tensorlife/tensorlife/tensor_test.oomStep\n       .+/tensor_test.go:\d+`, err.Error())
	for _, x := range held {
		require.NoError(t, x.Free())
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		assert.LessOrEqual(t, len(line), 100, "an OOM report fits a terminal: %q", line)
	}
}

func TestViewSharesMemoryAndOwnership(t *testing.T) {
	dev, tr, alloc := setup(t, 1<<20)
	x, err := tensor.FromSlice(context.Background(), alloc, []int32{0, 1, 2, 3, 4, 5, 6, 7})
	require.NoError(t, err)
	v, err := x.View(2, 2, 2)
	require.NoError(t, err)
	assert.Equal(t, tensor.Shape{2, 2}, v.Shape())
	assert.EqualValues(t, 16, v.Bytes())
	got, err := tensor.ToSlice[int32](v)
	require.NoError(t, err)
	assert.Equal(t, []int32{2, 3, 4, 5}, got)
	xp, _ := x.Ptr()
	vp, _ := v.Ptr()
	assert.Equal(t, xp.Add(8), vp)

	require.NoError(t, v.CopyFromHost([]byte{9, 0, 0, 0, 9, 0, 0, 0, 9, 0, 0, 0, 9, 0, 0, 0}))
	all, err := tensor.ToSlice[int32](x)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 9, 9, 9, 9, 6, 7}, all)

	_, err = x.View(7, 2)
	assert.ErrorIs(t, err, tensor.ErrSizeMismatch)
	_, err = x.View(-1, 1)
	assert.ErrorIs(t, err, tensor.ErrSizeMismatch)
	_, err = v.View(0, 5)
	assert.ErrorIs(t, err, tensor.ErrSizeMismatch, "a view cannot reach past its parent view")

	require.NoError(t, x.Free())
	assert.EqualValues(t, 32, dev.Used(), "the view still owns the memory")
	require.NoError(t, v.Free())
	assert.EqualValues(t, 0, dev.Used())
	assert.EqualValues(t, 0, tr.Totals().LiveCount)
}

func TestViewOffsetsCannotWrap(t *testing.T) {
	_, _, alloc := setup(t, 1<<20)
	x, err := tensor.FromSlice(context.Background(), alloc, []float64{10, 11, 12, 13})
	require.NoError(t, err)
	defer freeOnce(t, x)
	v, err := x.View(2, 2)
	require.NoError(t, err)
	defer freeOnce(t, v)
	for _, off := range []int{1<<61 - 1, 1 << 61, 1<<63 - 1} {
		_, err := v.View(off, 2)
		assert.ErrorIs(t, err, tensor.ErrSizeMismatch, "offset %d", off)
		_, err = x.View(off, 1)
		assert.ErrorIs(t, err, tensor.ErrSizeMismatch, "offset %d", off)
	}
}

// gcDevice runs the garbage collector inside every copy, as a busy process
// may at any moment.
type gcDevice struct{ *tensor.HostDevice }

func (d gcDevice) CopyToDevice(dst tensor.DevicePtr, src []byte) error {
	runtime.GC()
	runtime.GC()
	return d.HostDevice.CopyToDevice(dst, src)
}

// copyAndDrop writes to a tensor and drops it: the handle is unreachable
// once the copy starts.
//
//go:noinline
func copyAndDrop(alloc tensor.Allocator) error {
	x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 4096)
	if err != nil {
		return err
	}
	return x.CopyFromHost(make([]byte, 4096))
}

func TestHandleStaysAliveDuringCopy(t *testing.T) {
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	tr, err := track.New(track.OnLeak(func(track.LeakReport) {}))
	require.NoError(t, err)
	alloc, err := tensor.NewDeviceAllocator(gcDevice{host}, tr)
	require.NoError(t, err)
	for range 20 {
		require.NoError(t, copyAndDrop(alloc), "a dropped handle's memory must not go while its copy runs")
	}
}
