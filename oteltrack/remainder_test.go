package oteltrack_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/oteltrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/foreign"
	"github.com/tensorlife/tensorlife/track"
)

// TestRemainderOutsideTensorlife fills a host device partly from outside
// tensorlife and checks that the summary, the metrics and an out-of-memory
// error all report exactly that remainder, while a pool, a direct allocator
// and an adopted buffer count as tensorlife's.
func TestRemainderOutsideTensorlife(t *testing.T) {
	const kib = 1 << 10
	ctx := context.Background()
	dev, err := tensor.NewHostDevice(1024*kib, tensor.DeviceName("host:0"))
	require.NoError(t, err)
	tr, err := track.New()
	require.NoError(t, err)

	// 300 KiB taken straight from the device: tensorlife does not know it.
	outside, err := dev.Alloc(300 * kib)
	require.NoError(t, err)
	defer func() { require.NoError(t, dev.Free(outside, 300*kib)) }()

	p, err := pool.New(dev, pool.Tracker(tr))
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	kv, err := tensor.New(ctx, p, tensor.Uint8, 128*kib) // a class size: 128 KiB reserved
	require.NoError(t, err)
	defer kv.Free()
	scratch, err := tensor.New(ctx, p, tensor.Uint8, 16*kib)
	require.NoError(t, err)
	require.NoError(t, scratch.Free()) // 16 KiB stays cached in the pool

	direct, err := tensor.NewDeviceAllocator(dev, tr)
	require.NoError(t, err)
	logits, err := tensor.New(ctx, direct, tensor.Uint8, 64*kib)
	require.NoError(t, err)
	defer logits.Free()

	// 32 KiB a library allocated, adopted: tensorlife's from now on.
	lib, err := dev.Alloc(32 * kib)
	require.NoError(t, err)
	adopted, err := foreign.Adopt(ctx, tr, foreign.Memory{Device: dev, Ptr: lib, Bytes: 32 * kib,
		Release: func(p tensor.DevicePtr) error { return dev.Free(p, 32*kib) }}, tensor.Spec{DType: tensor.Uint8, Shape: tensor.Shape{32 * kib}})
	require.NoError(t, err)
	defer adopted.Free()

	const (
		reserved = (128 + 16 + 64 + 32) * kib
		used     = 300*kib + reserved
		free     = 1024*kib - used
	)
	require.Equal(t, int64(used), dev.Used(), "the test's own arithmetic")
	assert.Equal(t, int64(reserved), tr.ReservedOn("host:0"))

	src := report.Sources{Pools: []report.PoolSource{p}, Devices: []report.DeviceSource{dev}}
	t.Run("summary", func(t *testing.T) {
		var b strings.Builder
		require.NoError(t, report.WriteSummary(&b, tr, report.WithSources(src)))
		assert.Regexp(t, regexp.MustCompile(`(?m)^  host:0\s+540 KiB\s+240 KiB\s+300 KiB\s+484 KiB\s+1 MiB$`), b.String())
	})
	t.Run("metrics", func(t *testing.T) {
		mp, collect := metricsReader(t)
		m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp), oteltrack.WithSources(src))
		require.NoError(t, err)
		defer m.Stop()
		_, points := pointsOf(t, collect()["tensorlife.device.memory.usage"])
		const at = "tensorlife.device=host:0,tensorlife.device.memory.state="
		assert.Equal(t, map[string]int64{at + "tensorlife": reserved, at + "outside": 300 * kib, at + "free": free}, points)
	})
	t.Run("out of memory", func(t *testing.T) {
		_, err := tensor.New(ctx, p, tensor.Uint8, 600*kib) // 640 KiB after rounding; 484 KiB are free
		var oom *tensor.OOMError
		require.ErrorAs(t, err, &oom)
		assert.Equal(t, "host:0", oom.Device)
		assert.Equal(t, int64(640*kib), oom.Requested)
		// Making room first returned the cached block to the device.
		assert.Equal(t, int64(128*kib), oom.Reserved)
		assert.Equal(t, int64(128*kib), oom.Active)
		assert.Equal(t, int64(96*kib), oom.OtherReserved, "the direct allocator and the adopted buffer")
		assert.Equal(t, int64(300*kib), oom.Outside)
		assert.Equal(t, int64(free+16*kib), oom.DeviceFree)
		text := oom.Error()
		for _, want := range []string{
			"out of memory on host:0: requested 640 KiB",
			"reserved            128 KiB: active 128 KiB, cached 0 B, largest cached block 0 B",
			"other allocators    96 KiB reserved on host:0 by other tensorlife allocators",
			"outside tensorlife  300 KiB used on host:0 by memory tensorlife does not hold",
			"free on device      500 KiB of 1 MiB",
			"top live sites",
		} {
			assert.Contains(t, text, want)
		}
	})
	t.Run("fragmented budget", func(t *testing.T) {
		small, err := pool.New(dev, pool.Tracker(tr), pool.Budget(64*kib))
		require.NoError(t, err)
		defer func() { require.NoError(t, small.Close()) }()
		idle, err := tensor.New(ctx, small, tensor.Uint8, 32*kib)
		require.NoError(t, err)
		require.NoError(t, idle.Free())
		held, err := tensor.New(ctx, small, tensor.Uint8, 16*kib)
		require.NoError(t, err)
		defer held.Free()
		// 56 KiB: more than the budget leaves beside the active 16 KiB, so
		// emptying the cache cannot help and the 32 KiB block stays cached.
		_, err = tensor.New(ctx, small, tensor.Uint8, 56*kib)
		var oom *tensor.OOMError
		require.ErrorAs(t, err, &oom)
		assert.Equal(t, int64(32*kib), oom.LargestCached)
		assert.Equal(t, int64(224*kib), oom.OtherReserved, "the first pool, the direct allocator and the adoption")
		assert.Equal(t, int64(300*kib), oom.Outside)
		assert.Contains(t, oom.Error(), "requested 56 KiB, budget limit 64 KiB")
		assert.Contains(t, oom.Error(), "48 KiB: active 16 KiB, cached 32 KiB, largest cached block 32 KiB")
	})
}
