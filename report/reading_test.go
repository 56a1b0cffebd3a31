package report_test

import (
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

func (p *countedPool) Reserved() (string, int64) { p.reads++; return p.stats.Device, p.stats.Reserved }

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
		Pools:   []report.PoolSource{attached, other},
		Devices: []report.DeviceSource{fixedDevice{"gpu0", 400, 1000}, fixedDevice{"gpu1", 900, 1000}},
	}

	r := src.Read(tr)
	assert.Equal(t, []pool.Stats{attached.stats, other.stats}, r.Pools)
	require.Len(t, r.Devices, 2)
	assert.Equal(t, report.DeviceMemory{Device: "gpu0", Used: 600, Free: 400, Total: 1000, Reserved: 500, Outside: 100}, r.Devices[0])
	assert.Equal(t, report.DeviceMemory{Device: "gpu1", Used: 100, Free: 900, Total: 1000, Reserved: 50, Outside: 50}, r.Devices[1])
	assert.Equal(t, 1, attached.reads, "a pool both attached and listed is read once")
	assert.Equal(t, 1, other.reads)
	assert.Equal(t, 1, elsewhere.reads)
}
