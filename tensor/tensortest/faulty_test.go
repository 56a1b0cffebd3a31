package tensortest_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
)

func newDevice(t *testing.T, capacity int64, opts ...tensortest.FaultOption) (*tensortest.Faulty, *tensor.HostDevice) {
	t.Helper()
	host, err := tensor.NewHostDevice(capacity)
	require.NoError(t, err)
	d, err := tensortest.NewFaulty(host, opts...)
	require.NoError(t, err)
	return d, host
}

// Without options the wrapper must behave as a device in every respect.
func TestConformance(t *testing.T) {
	tensortest.Run(t, func(t *testing.T, capacity int64) tensor.Device {
		d, _ := newDevice(t, capacity)
		return d
	})
}

func TestNewRejectsBadInput(t *testing.T) {
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	_, err = tensortest.NewFaulty(nil)
	assert.ErrorIs(t, err, tensor.ErrNilAllocator)

	cases := []struct {
		name string
		opts []tensortest.FaultOption
	}{
		{"nil option", []tensortest.FaultOption{nil}},
		{"FailNth(0)", []tensortest.FaultOption{tensortest.FailNth(0)}},
		{"FailNth(-3)", []tensortest.FaultOption{tensortest.FailNth(-3)}},
		{"FailFraction(-0.1)", []tensortest.FaultOption{tensortest.FailFraction(-0.1, 1)}},
		{"FailFraction(1.5)", []tensortest.FaultOption{tensortest.FailFraction(1.5, 1)}},
		{"FailFraction(NaN)", []tensortest.FaultOption{tensortest.FailFraction(math.NaN(), 1)}},
		{"FailFraction twice", []tensortest.FaultOption{tensortest.FailFraction(0, 1), tensortest.FailFraction(0.5, 1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tensortest.NewFaulty(host, tc.opts...)
			assert.ErrorIs(t, err, tensortest.ErrInvalidOption)
			assert.Nil(t, d)
		})
	}
}

func TestFailNth(t *testing.T) {
	d, host := newDevice(t, 1<<20, tensortest.FailNth(2), tensortest.FailNth(4))
	var failed []int
	var ptrs []tensor.DevicePtr
	for i := 1; i <= 5; i++ {
		p, err := d.Alloc(1024)
		if err != nil {
			failed = append(failed, i)
			assert.ErrorIs(t, err, tensortest.ErrInjected)
			assert.ErrorIs(t, err, tensor.ErrOutOfMemory)
			var de *tensor.DeviceError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, "alloc", de.Op)
			assert.Equal(t, "host", de.Device)
			assert.Equal(t, int64(1024), de.Bytes)
			continue
		}
		ptrs = append(ptrs, p)
	}
	assert.Equal(t, []int{2, 4}, failed)
	assert.Equal(t, int64(5), d.Allocs())
	assert.Equal(t, int64(2), d.Injected())

	blocks, bytes := d.Outstanding()
	assert.Equal(t, int64(3*1024), bytes)
	assert.Equal(t, 3, blocks)
	assert.Equal(t, host.Used(), bytes, "injected failures must take nothing from the wrapped device")

	for _, p := range ptrs {
		require.NoError(t, d.Free(p, 1024))
	}
	blocks, bytes = d.Outstanding()
	assert.Zero(t, bytes)
	assert.Zero(t, blocks)
	assert.Zero(t, host.Used())
}

func TestWithoutOOM(t *testing.T) {
	d, _ := newDevice(t, 1<<20, tensortest.FailNth(1), tensortest.WithoutOOM())
	_, err := d.Alloc(64)
	assert.ErrorIs(t, err, tensortest.ErrInjected)
	assert.NotErrorIs(t, err, tensor.ErrOutOfMemory)
}

// failures returns which of n allocations fail on a fresh device.
func failures(t *testing.T, n int, f float64, seed uint64) []bool {
	t.Helper()
	d, _ := newDevice(t, 1<<20, tensortest.FailFraction(f, seed))
	out := make([]bool, n)
	for i := range out {
		p, err := d.Alloc(16)
		out[i] = err != nil
		if err == nil {
			require.NoError(t, d.Free(p, 16))
		} else {
			require.ErrorIs(t, err, tensortest.ErrInjected)
		}
	}
	assert.Equal(t, int64(n), d.Allocs())
	return out
}

func TestFailFraction(t *testing.T) {
	const n = 2000
	count := func(fails []bool) (k int) {
		for _, f := range fails {
			if f {
				k++
			}
		}
		return k
	}
	cases := []struct {
		f        float64
		min, max int
	}{
		{0, 0, 0},
		{0.1, 120, 280},
		{0.5, 850, 1150},
		{1, n, n},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.f), func(t *testing.T) {
			got := count(failures(t, n, tc.f, 7))
			assert.GreaterOrEqual(t, got, tc.min)
			assert.LessOrEqual(t, got, tc.max)
		})
	}
	t.Run("same seed replays", func(t *testing.T) {
		assert.Equal(t, failures(t, 300, 0.3, 11), failures(t, 300, 0.3, 11))
		assert.NotEqual(t, failures(t, 300, 0.3, 11), failures(t, 300, 0.3, 12))
	})
}

func TestFreeChecks(t *testing.T) {
	d, host := newDevice(t, 1<<20)
	p, err := d.Alloc(4096)
	require.NoError(t, err)

	err = d.Free(p, 4000)
	assert.ErrorIs(t, err, tensor.ErrSizeMismatch)
	err = d.Free(p.Add(512), 4096)
	assert.ErrorIs(t, err, tensor.ErrInvalidPointer)
	assert.Equal(t, int64(2), d.BadFrees())
	assert.Equal(t, int64(4096), host.Used(), "refused frees must not reach the wrapped device")

	require.NoError(t, d.Free(p, 4096))
	err = d.Free(p, 4096)
	assert.ErrorIs(t, err, tensor.ErrInvalidPointer)
	assert.Contains(t, err.Error(), "double free")
	var de *tensor.DeviceError
	assert.True(t, errors.As(err, &de))
	assert.Equal(t, int64(1), d.DoubleFrees())
	assert.Equal(t, int64(2), d.BadFrees())

	// A pointer handed out again is live again: freeing it is not a double free.
	q, err := d.Alloc(4096)
	require.NoError(t, err)
	require.NoError(t, d.Free(q, 4096))
	assert.Equal(t, int64(1), d.DoubleFrees())
	blocks, bytes := d.Outstanding()
	assert.Zero(t, bytes)
	assert.Zero(t, blocks)
}

func TestPassThrough(t *testing.T) {
	d, host := newDevice(t, 1<<20)
	assert.Same(t, tensor.Device(host), d.Inner())
	_, err := d.Alloc(0)
	assert.ErrorIs(t, err, tensor.ErrInvalidSize)
	assert.Zero(t, d.Allocs(), "refused sizes are not counted")

	p, err := d.Alloc(8)
	require.NoError(t, err)
	require.NoError(t, d.Memset(p, 7, 4))
	require.NoError(t, d.CopyToDevice(p.Add(4), []byte{1, 2, 3, 4}))
	out := make([]byte, 8)
	require.NoError(t, d.CopyToHost(out, p))
	assert.Equal(t, []byte{7, 7, 7, 7, 1, 2, 3, 4}, out)
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), total)
	assert.Equal(t, total-8, free)
	require.NoError(t, d.Free(p, 8))
}
