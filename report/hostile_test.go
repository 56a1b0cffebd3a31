package report_test

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// Hostile parts: each method panics.
type (
	panicReserver struct{}
	panicPool     struct{}
	panicCache    struct{}
	panicWatcher  struct{}
	// negativeWatcher's suspect says it has -50 B left.
	negativeWatcher struct{}
)

func (panicReserver) PartInfo() track.PartInfo { panic("hostile PartInfo") }

// The other hostile parts say what they are; their own methods panic.
func (*panicPool) PartInfo() track.PartInfo       { return track.PartInfo{Kind: "pool", Left: -1} }
func (*panicCache) PartInfo() track.PartInfo      { return track.PartInfo{Kind: "cache", Left: -1} }
func (*panicWatcher) PartInfo() track.PartInfo    { return track.PartInfo{Kind: "watcher", Left: -1} }
func (*negativeWatcher) PartInfo() track.PartInfo { return track.PartInfo{Kind: "watcher", Left: -1} }

func (*panicPool) Stats() pool.Stats            { panic("hostile pool Stats") }
func (*panicCache) Stats() mask.CacheStats      { panic("hostile cache Stats") }
func (*panicWatcher) Rules() watch.Rules        { panic("hostile Rules") }
func (*panicWatcher) WindowsEnded() uint64      { panic("hostile WindowsEnded") }
func (*panicWatcher) SuspectCount() int         { panic("hostile SuspectCount") }
func (*panicWatcher) Suspects() []watch.Suspect { panic("hostile Suspects") }

func (*negativeWatcher) Rules() watch.Rules   { return watch.Rules{Windows: 3, MostOf: 2} }
func (*negativeWatcher) WindowsEnded() uint64 { return 9 }
func (*negativeWatcher) SuspectCount() int    { return 1 }
func (*negativeWatcher) Suspects() []watch.Suspect {
	return []watch.Suspect{{OutlivedBytes: 1 << 20, Device: "host", HeadroomOf: watch.HeadroomPoolBudget,
		Headroom: -50, RunsOutIn: 1, GrowthPerSecond: 1}}
}

// hostileCase is one hostile part a summary must survive.
type hostileCase struct {
	name    string
	setup   func(t *testing.T, tr *track.Tracker) (report.Sources, any) // the sources, and what to keep alive
	unread  bool                                                        // listed under Unread parts
	panics  bool
	mustNot string // a text the summary must not hold
}

func hostileCases() []hostileCase {
	hostileDevice := func(t *testing.T, tr *track.Tracker, methods ...string) (report.Sources, any) {
		host, err := tensor.NewHostDevice(1 << 20)
		require.NoError(t, err)
		dev := tensortest.NewHostile(host)
		p, err := pool.New(dev, pool.Tracker(tr))
		require.NoError(t, err)
		dev.Panic(methods...) // after New, which reads the name
		return report.Sources{}, p
	}
	return []hostileCase{
		{name: "PartInfo panics", setup: func(t *testing.T, tr *track.Tracker) (report.Sources, any) {
			p := &panicReserver{}
			track.Attach(tr, p)
			return report.Sources{}, p
		}, unread: true, panics: true},
		{name: "an attached pool's Stats panics", setup: func(t *testing.T, tr *track.Tracker) (report.Sources, any) {
			p := &panicPool{}
			track.Attach(tr, p)
			return report.Sources{}, p
		}, unread: true, panics: true},
		{name: "a listed pool's and cache's Stats panic", setup: func(t *testing.T, tr *track.Tracker) (report.Sources, any) {
			return report.Sources{Pools: []report.PoolSource{&panicPool{}}, Caches: []report.CacheSource{&panicCache{}}}, nil
		}, unread: true, panics: true},
		{name: "a pool's device MemInfo panics", setup: func(t *testing.T, tr *track.Tracker) (report.Sources, any) {
			return hostileDevice(t, tr, "MemInfo")
		}, unread: true, panics: true},
		{name: "a pool's device UUID and Name panic", setup: func(t *testing.T, tr *track.Tracker) (report.Sources, any) {
			return hostileDevice(t, tr, "UUID", "Name")
		}, unread: true, panics: true},
		{name: "a listed device panics everywhere", setup: func(t *testing.T, tr *track.Tracker) (report.Sources, any) {
			host, err := tensor.NewHostDevice(1 << 20)
			require.NoError(t, err)
			return report.Sources{Devices: []report.DeviceSource{tensortest.NewHostile(host, "Name", "MemInfo", "UUID")}}, nil
		}, unread: true, panics: true},
		{name: "a watcher panics", setup: func(t *testing.T, tr *track.Tracker) (report.Sources, any) {
			w := &panicWatcher{}
			track.Attach(tr, w)
			return report.Sources{}, w
		}, unread: true, panics: true},
		{name: "a negative headroom", setup: func(t *testing.T, tr *track.Tracker) (report.Sources, any) {
			w := &negativeWatcher{}
			track.Attach(tr, w)
			return report.Sources{}, w
		}, mustNot: "-50 B"},
	}
}

func TestWriteSummarySurvivesHostileParts(t *testing.T) {
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := track.New(track.Logger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			src, keep := tc.setup(t, tr)
			host, err := tensor.NewHostDevice(1 << 20)
			require.NoError(t, err)
			alloc, err := tensor.NewDeviceAllocator(host, tr)
			require.NoError(t, err)
			x, err := tensor.New(context.Background(), alloc, tensor.Uint8, 100)
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NotPanics(t, func() { require.NoError(t, report.WriteSummary(&buf, tr, report.WithSources(src))) })
			out := buf.String()
			assert.Contains(t, out, "Top sites by live bytes", "the summary goes on past the part")
			if tc.panics {
				assert.Positive(t, tr.Totals().PartPanics)
				assert.Contains(t, out, "part panics")
			} else {
				assert.Zero(t, tr.Totals().PartPanics)
			}
			assert.Equal(t, tc.unread, strings.Contains(out, "Unread parts"), out)
			if tc.mustNot != "" {
				assert.NotContains(t, out, tc.mustNot)
			}
			r := src.Read(tr)
			assert.Equal(t, tc.unread, len(r.Skipped) > 0, "a watcher is read with the other parts")
			for _, err := range r.Skipped {
				assert.ErrorIs(t, err, track.ErrPanic)
			}
			require.NoError(t, x.Free())
			runtime.KeepAlive(keep)
		})
	}
}
