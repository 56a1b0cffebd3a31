package oteltrack_test

import (
	"context"
	"log/slog"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/oteltrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/tensor/tensortest"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

type (
	panicReserver struct{}
	panicPool     struct{}
	panicCache    struct{}
	panicWatcher  struct{}
)

func (*panicReserver) PartInfo() track.PartInfo { panic("hostile PartInfo") }

// The other hostile parts say what they are; their own methods panic.
func (*panicPool) PartInfo() track.PartInfo    { return track.PartInfo{Kind: "pool", Left: -1} }
func (*panicCache) PartInfo() track.PartInfo   { return track.PartInfo{Kind: "cache", Left: -1} }
func (*panicWatcher) PartInfo() track.PartInfo { return track.PartInfo{Kind: "watcher", Left: -1} }

func (*panicPool) Stats() pool.Stats            { panic("hostile pool Stats") }
func (*panicCache) Stats() mask.CacheStats      { panic("hostile cache Stats") }
func (*panicWatcher) Rules() watch.Rules        { panic("hostile Rules") }
func (*panicWatcher) WindowsEnded() uint64      { panic("hostile WindowsEnded") }
func (*panicWatcher) SuspectCount() int         { panic("hostile SuspectCount") }
func (*panicWatcher) Suspects() []watch.Suspect { panic("hostile Suspects") }

// The metrics callback reads every part: one that panics is left out of
// the collection and counted in tensorlife.part.panics, and the rest is
// observed.
func TestMetricsCallbackSurvivesHostileParts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attach func(tr *track.Tracker) (report.Sources, any)
	}{
		{"PartInfo", func(tr *track.Tracker) (report.Sources, any) {
			p := &panicReserver{}
			track.Attach(tr, p)
			return report.Sources{}, p
		}},
		{"a pool's Stats", func(tr *track.Tracker) (report.Sources, any) {
			p := &panicPool{}
			track.Attach(tr, p)
			return report.Sources{}, p
		}},
		{"a cache's Stats", func(*track.Tracker) (report.Sources, any) {
			return report.Sources{Caches: []report.CacheSource{&panicCache{}}}, nil
		}},
		{"a watcher", func(tr *track.Tracker) (report.Sources, any) {
			w := &panicWatcher{}
			track.Attach(tr, w)
			return report.Sources{}, w
		}},
		{"a device", func(*track.Tracker) (report.Sources, any) {
			host, _ := tensor.NewHostDevice(1 << 20)
			return report.Sources{Devices: []report.DeviceSource{tensortest.NewHostile(host, "Name", "MemInfo", "UUID")}}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := track.New(track.Logger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			src, keep := tc.attach(tr)
			host, err := tensor.NewHostDevice(1 << 20)
			require.NoError(t, err)
			a, err := tensor.NewDeviceAllocator(host, tr)
			require.NoError(t, err)
			x, err := tensor.New(context.Background(), a, tensor.Uint8, 100)
			require.NoError(t, err)
			mp, collect := metricsReader(t)
			m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp), oteltrack.WithSources(src))
			require.NoError(t, err)
			var got map[string]metricdata.Metrics
			require.NotPanics(t, func() { got = collect() })
			panics := got["tensorlife.part.panics"].Data.(metricdata.Sum[int64]).DataPoints
			require.Len(t, panics, 1)
			assert.Positive(t, panics[0].Value, "counted")
			assert.Equal(t, tr.Totals().PartPanics, panics[0].Value, "in the same collection")
			assert.Contains(t, got, "tensorlife.tensor.live", "the rest is observed")
			require.NoError(t, m.Stop())
			require.NoError(t, x.Free())
			runtime.KeepAlive(keep)
		})
	}
}
