package report_test

import (
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/track"
)

// countedPool is a PoolSource that counts how often it is read.
type countedPool struct {
	stats pool.Stats
	reads int
}

func (p *countedPool) Stats() pool.Stats { p.reads++; return p.stats }

// PartInfo is not a read of the pool's figures: a reading takes a pool's
// reserved bytes from its Stats, so that they agree with its row.
func (p *countedPool) PartInfo() track.PartInfo {
	return track.PartInfo{Kind: "pool", Device: p.stats.Device, Reserved: p.stats.Reserved, Left: -1}
}

type fixedDevice struct {
	name        string
	free, total int64
}

func (d fixedDevice) Name() string                          { return d.name }
func (d fixedDevice) MemInfo() (free, total int64, e error) { return d.free, d.total, nil }

func TestReadReadsEachAllocatorOnce(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	attached := &countedPool{stats: pool.Stats{Device: "gpu0", Reserved: 300}}
	track.Attach(tr, attached)
	other := &countedPool{stats: pool.Stats{Device: "gpu0", Reserved: 200}} // attached to no tracker
	elsewhere := &countedPool{stats: pool.Stats{Device: "gpu1", Reserved: 50}}
	track.Attach(tr, elsewhere) // attached, not among the Sources' pools
	src := report.Sources{
		Pools:   []report.PoolSource{attached, other}, // attached is listed again: shown once
		Devices: []report.DeviceSource{fixedDevice{"gpu0", 400, 1000}, fixedDevice{"gpu1", 900, 1000}},
	}

	r := src.Read(tr)
	assert.Equal(t, []pool.Stats{attached.stats, elsewhere.stats, other.stats}, r.Pools, "the tracker's pools, then the others")
	require.Len(t, r.Devices, 2)
	assert.Equal(t, report.DeviceMemory{Device: "gpu0", Used: 600, Free: 400, Total: 1000, Reserved: 500, Outside: 100}, r.Devices[0])
	assert.Equal(t, report.DeviceMemory{Device: "gpu1", Used: 100, Free: 900, Total: 1000, Reserved: 50, Outside: 50}, r.Devices[1])
	assert.Equal(t, 1, attached.reads, "a pool both attached and listed is read once")
	assert.Equal(t, 1, other.reads)
	assert.Equal(t, 1, elsewhere.reads)
}

// The split of a device adds up whatever the device and the books report:
// tensorlife (Used - Outside), outside and free are never negative and sum
// to Total.
func TestDeviceSplitAlwaysAddsUp(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		free, total, reserved int64
		used, outside         int64
	}{
		{"reserved above used", 1000, 1000, 1 << 40, 0, 0},
		{"reserved above total", 200, 1000, 5000, 800, 0},
		{"negative reserved", 400, 1000, -1 << 62, 600, 600},
		{"free above total", 2000, 1000, 0, 0, 0},
		{"negative free", -5, 1000, 100, 1000, 900},
		{"negative total", 10, -1, 0, 0, 0},
		{"extremes", math.MinInt64, math.MaxInt64, math.MinInt64, math.MaxInt64, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := track.New()
			require.NoError(t, err)
			p := &countedPool{stats: pool.Stats{Device: "gpu0", Reserved: tc.reserved}}
			track.Attach(tr, p)
			r := report.Sources{Devices: []report.DeviceSource{fixedDevice{"gpu0", tc.free, tc.total}}}.Read(tr)
			require.Len(t, r.Devices, 1)
			d := r.Devices[0]
			assert.Equal(t, tc.used, d.Used)
			assert.Equal(t, tc.outside, d.Outside)
			assert.Equal(t, max(tc.reserved, 0), d.Reserved, "what the allocators hold, a negative claim read as 0")
			for _, v := range []int64{d.Used - d.Outside, d.Outside, d.Free} {
				assert.GreaterOrEqual(t, v, int64(0))
			}
			assert.Equal(t, d.Total, (d.Used-d.Outside)+d.Outside+d.Free)
			runtime.KeepAlive(p)
		})
	}
}

// TestDeviceSplitSaturatesReserved guards the device split against wrapping:
// adopted bytes near MaxInt64 meeting another allocator on the same device
// name add up to MaxInt64, as Tracker.ReservedOn saturates, never to a
// negative reservation; negative claims, which no allocator can hold, read
// as 0.
func TestDeviceSplitSaturatesReserved(t *testing.T) {
	for _, tc := range []struct {
		name     string
		claims   []int64
		reserved int64
	}{
		{"huge and more", []int64{math.MaxInt64 - 10, 100}, math.MaxInt64},
		{"three halves", []int64{math.MaxInt64 / 2, math.MaxInt64 / 2, math.MaxInt64 / 2}, math.MaxInt64},
		{"huge negatives", []int64{math.MinInt64 + 10, -100}, 0},
		{"fits", []int64{math.MaxInt64 - 100, 100}, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := track.New()
			require.NoError(t, err)
			var attached []*countedPool
			for _, c := range tc.claims {
				p := &countedPool{stats: pool.Stats{Device: "gpu0", Reserved: c}}
				track.Attach(tr, p)
				attached = append(attached, p)
			}
			listed := &countedPool{stats: pool.Stats{Device: "gpu0", Reserved: 0}} // a listed pool counts too
			r := report.Sources{Pools: []report.PoolSource{listed},
				Devices: []report.DeviceSource{fixedDevice{"gpu0", 400, 1000}}}.Read(tr)
			require.Len(t, r.Devices, 1)
			d := r.Devices[0]
			assert.Equal(t, tc.reserved, d.Reserved)
			if tc.reserved > 0 {
				assert.Equal(t, int64(0), d.Outside, "all of the used memory is tensorlife's")
			} else {
				assert.Equal(t, int64(600), d.Outside, "none of it is")
			}
			assert.Equal(t, d.Total, (d.Used-d.Outside)+d.Outside+d.Free)
			runtime.KeepAlive(attached)
		})
	}
}
