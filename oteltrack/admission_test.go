package oteltrack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tensorlife/tensorlife/oteltrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// sumPoints returns an int64 sum's points by their attributes, encoded.
func sumPoints(t *testing.T, m metricdata.Metrics) map[string]int64 {
	t.Helper()
	d, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s: %T", m.Name, m.Data)
	out := make(map[string]int64)
	for _, dp := range d.DataPoints {
		for _, kv := range dp.Attributes.ToSlice() {
			assert.Contains(t, []attribute.Key{"tensorlife.device", "tensorlife.request.kind", "tensorlife.admission.result"}, kv.Key, m.Name)
			assert.True(t, utf8.ValidString(kv.Value.AsString()))
		}
		out[dp.Attributes.Encoded(attribute.DefaultEncoder())] = dp.Value
	}
	return out
}

// admissionPool is an 8 MiB pool on a host device, recording in a tracker
// of the test's own whose metrics collect reads.
func admissionPool(t *testing.T) (*pool.Pool, func() map[string]metricdata.Metrics) {
	t.Helper()
	tr, err := track.New(track.Name(t.Name()))
	require.NoError(t, err)
	host, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	p, err := pool.New(host, pool.Tracker(tr), pool.Budget(8<<20))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	mp, collect := metricsReader(t)
	m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Stop()) })
	return p, collect
}

// Admission is on the metrics: admitted and refused requests by kind, the
// admitted that ran out of memory, and the open admissions' reserved and
// promised bytes, which an End takes out of the next collection.
func TestMetricsAdmission(t *testing.T) {
	p, collect := admissionPool(t)

	got := collect()
	assert.NotContains(t, got, "tensorlife.pool.admissions", "no series before the first Admit")

	ctx, a, err := p.Admit(context.Background(), "route=/gen", 6<<20)
	require.NoError(t, err)
	x, err := tensor.New(ctx, p, tensor.Uint8, 1<<20)
	require.NoError(t, err)
	for range 3 {
		_, _, err = p.Admit(context.Background(), "route=/gen", 4<<20)
		require.ErrorIs(t, err, pool.ErrAdmissionRefused)
	}
	_, err = tensor.New(ctx, p, tensor.Uint8, 8<<20) // runs out inside the admission
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)

	got = collect()
	const dev, kind = "tensorlife.device=host", `tensorlife.request.kind=route\=/gen`
	assert.Equal(t, map[string]int64{
		"tensorlife.admission.result=admitted," + dev + "," + kind: 1,
		"tensorlife.admission.result=refused," + dev + "," + kind:  3,
	}, sumPoints(t, got["tensorlife.pool.admissions"]))
	assert.Equal(t, map[string]int64{dev + "," + kind: 1}, sumPoints(t, got["tensorlife.pool.admission.ran_out"]))
	assert.Equal(t, map[string]int64{dev: 1}, sumPoints(t, got["tensorlife.pool.admission.open"]))
	assert.Equal(t, map[string]int64{dev: 6 << 20}, sumPoints(t, got["tensorlife.pool.admission.reserved"]))
	assert.Equal(t, map[string]int64{dev: 5 << 20}, sumPoints(t, got["tensorlife.pool.admission.promised"]))

	a.End()
	require.NoError(t, x.Free())
	got = collect()
	assert.Equal(t, map[string]int64{dev: 0}, sumPoints(t, got["tensorlife.pool.admission.open"]))
	assert.Equal(t, map[string]int64{dev: 0}, sumPoints(t, got["tensorlife.pool.admission.reserved"]))
	assert.Equal(t, map[string]int64{dev: 0}, sumPoints(t, got["tensorlife.pool.admission.promised"]))
}

// The kinds on the metrics are bounded as the tracker's are, and each is
// valid UTF-8 of at most pool.MaxKindBytes: a kind from a hostile label
// makes neither a series per request nor an attribute an exporter rejects.
func TestMetricsAdmissionKindsBounded(t *testing.T) {
	p, collect := admissionPool(t)

	for i := range 200 {
		kind := fmt.Sprintf("route=/%d/\xff", i) + strings.Repeat("x", 1000+i)
		_, _, err := p.Admit(context.Background(), kind, 16<<20)
		require.ErrorIs(t, err, pool.ErrAdmissionRefused)
	}
	points := sumPoints(t, collect()["tensorlife.pool.admissions"])
	assert.Len(t, points, 2*(track.MaxRequestKinds+1), "32 kinds and other, admitted and refused")
	var refused int64
	for attrs, v := range points {
		if strings.Contains(attrs, "result=refused") {
			refused += v
		}
		assert.Less(t, len(attrs), 2*pool.MaxKindBytes)
	}
	assert.EqualValues(t, 200, refused)
}
