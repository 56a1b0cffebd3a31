package oteltrack_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tensorlife/tensorlife/oteltrack"
	"github.com/tensorlife/tensorlife/track"
)

// The peak gauges state each kind's p50, p99 and max as the summary does:
// within one 1/8-octave bucket of the true percentile, never below it, the
// max exact; one series per kind and device.
func TestMetricsPeakGaugesAreTheSummarys(t *testing.T) {
	tr, err := track.New(track.RequestKinds("route"))
	require.NoError(t, err)
	mp, collect := metricsReader(t)
	m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Stop()) }()

	rng := rand.New(rand.NewPCG(7, 45))
	peaks := map[string][]int64{}
	serve := func(route, device string, bytes int64) {
		ctx, end := track.WithRequest(track.WithLabels(context.Background(), "route", route))
		r := &track.Record{Bytes: bytes, Meta: track.InternMeta("kv-cache", device, "", nil)}
		require.NoError(t, tr.Books().Record(ctx, r, 0))
		require.NoError(t, r.Release())
		end()
		peaks[route+"@"+device] = append(peaks[route+"@"+device], bytes)
	}
	for range 500 { // log-uniform from 8 KiB to 16 MiB: a long tail
		serve("/generate", "host", int64(8<<10*math.Pow(2, 11*rng.Float64())))
	}
	for range 50 {
		serve("/embed", "host", 4096+rng.Int64N(4096))
		serve("/embed", "cuda:0", 1<<20+rng.Int64N(1<<20))
	}

	gauges := map[string]map[string]int64{} // name -> kind@device -> value
	for name, got := range collect() {
		g, ok := got.Data.(metricdata.Gauge[int64])
		if !ok || !slices.Contains([]string{"p50", "p99", "max"}, name[max(len(name)-3, 0):]) {
			continue
		}
		assert.Equal(t, "By", got.Unit, name)
		gauges[name] = map[string]int64{}
		for _, dp := range g.DataPoints {
			kind, _ := dp.Attributes.Value(attribute.Key("tensorlife.request.kind"))
			dev, _ := dp.Attributes.Value(attribute.Key("tensorlife.device"))
			assert.Equal(t, 2, dp.Attributes.Len(), "kind and device only")
			gauges[name][kind.AsString()[len("route="):]+"@"+dev.AsString()] = dp.Value
		}
	}
	require.Len(t, gauges, 3)
	costs := tr.RequestCosts() // what the summary's Request kinds section prints
	require.Len(t, costs, 3)
	eighth := math.Pow(2, 1.0/8)
	for _, k := range costs {
		key := k.Kind[len("route="):] + "@" + k.Device
		assert.Equal(t, k.PeakP50, gauges["tensorlife.request.memory.peak.p50"][key], key)
		assert.Equal(t, k.PeakP99, gauges["tensorlife.request.memory.peak.p99"][key], key)
		assert.Equal(t, k.PeakMax, gauges["tensorlife.request.memory.peak.max"][key], key)

		vals := slices.Sorted(slices.Values(peaks[key]))
		at := func(q float64) int64 { return vals[int(math.Ceil(q*float64(len(vals))))-1] }
		for q, got := range map[float64]int64{0.5: k.PeakP50, 0.99: k.PeakP99} {
			want := at(q)
			assert.GreaterOrEqual(t, got, want, "%s p%v", key, q*100)
			assert.Less(t, float64(got), float64(want)*eighth, "%s p%v within 1/8 of an octave", key, q*100)
			t.Logf("%-16s p%-2v true %8d, gauge %8d (%+.1f%%)", key, q*100, want, got, 100*(float64(got)/float64(want)-1))
		}
		assert.Equal(t, vals[len(vals)-1], k.PeakMax, key)
	}
}
