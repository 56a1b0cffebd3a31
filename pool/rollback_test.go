package pool_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
)

// onGoroutine runs f on a goroutine of its own and waits for it to end,
// returned or ended by runtime.Goexit.
func onGoroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// The books a pool takes before it calls its device are given back by
// defer: a device Alloc or Free that panics or calls runtime.Goexit leaves
// the budget, the reserved bytes and the block counts exact, so the whole
// budget can still be allocated afterwards.
func TestPoolBooksSurviveAPanicAndAGoexitInTheDevice(t *testing.T) {
	ctx := context.Background()
	const budget = 64 << 10
	for _, act := range []tensortest.Act{tensortest.ActPanic, tensortest.ActGoexit} {
		for _, method := range []string{"Alloc", "Free"} {
			t.Run(map[tensortest.Act]string{tensortest.ActPanic: "panic", tensortest.ActGoexit: "goexit"}[act]+"/"+method, func(t *testing.T) {
				p, dev, tr := hostilePool(t, pool.Budget(budget), pool.MaxCachedBytes(0))
				var x *tensor.Tensor
				if method == "Free" {
					var err error
					x, err = tensor.New(ctx, p, tensor.Uint8, 4096)
					require.NoError(t, err)
				}
				dev.Do(act, method)
				onGoroutine(func() {
					if method == "Alloc" {
						_, _ = tensor.New(ctx, p, tensor.Uint8, 4096)
					} else {
						_ = x.Free()
					}
				})
				dev.Do(act)
				s := p.Stats()
				assert.Zero(t, s.Reserved, "the reservation given back")
				assert.Zero(t, s.Active)
				assert.Equal(t, s.DeviceAllocs, s.DeviceFrees, "a block leaves the books once")
				assert.Zero(t, tr.Totals().LiveCount)

				// The whole budget is there to allocate.
				y, err := tensor.New(ctx, p, tensor.Uint8, budget)
				require.NoError(t, err, "no byte of the budget was lost")
				require.NoError(t, y.Free())
			})
		}
	}
}

// The same rule holds over a tensor.DeviceAllocator.
func TestDeviceAllocatorBooksSurviveAGoexitInAlloc(t *testing.T) {
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	dev := tensortest.NewHostile(host)
	a, err := tensor.NewDeviceAllocator(dev, nil)
	require.NoError(t, err)
	dev.Do(tensortest.ActGoexit, "Alloc")
	onGoroutine(func() { _, _ = tensor.New(context.Background(), a, tensor.Uint8, 4096) })
	assert.Zero(t, a.Stats().Reserved)
	assert.Zero(t, a.Stats().Allocs)
}

// badName is a device whose name is invalid UTF-8, and 1 MiB of it.
type badName struct{ tensor.Device }

func (badName) Name() string { return "gpu\xff" + strings.Repeat("\xfe", 1<<20) }

// A device's name is in every figure and error of the pool: it is cut to
// valid UTF-8 of at most track.MaxMetaText bytes, as a Meta's texts are.
func TestADevicesNameIsCutToValidText(t *testing.T) {
	host, err := tensor.NewHostDevice(1 << 20)
	require.NoError(t, err)
	p, err := pool.New(badName{host}, pool.Untracked(), pool.Budget(4096))
	require.NoError(t, err)
	for _, s := range []string{p.Stats().Device} {
		assert.True(t, utf8.ValidString(s))
		assert.LessOrEqual(t, len(s), track.MaxMetaText)
	}
	_, err = tensor.New(context.Background(), p, tensor.Uint8, 1<<20)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	assert.True(t, utf8.ValidString(err.Error()))
	assert.Less(t, len(err.Error()), 16<<10)
}
