package report_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tensorlife/tensorlife/oteltrack"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// shard allocates one device's part of a model, from one line.
//
//go:noinline
func shard(t *testing.T, p *pool.Pool, bytes int) *tensor.Tensor {
	x, err := tensor.New(context.Background(), p, tensor.Uint8, bytes)
	require.NoError(t, err)
	return x
}

// TestTwoDevicesSplitEveryReport runs one tracker over two host devices
// standing in for two GPUs, a pool on each, and checks that the summary,
// the profile, the metrics and an out-of-memory error tell them apart.
func TestTwoDevicesSplitEveryReport(t *testing.T) {
	const kib = 1 << 10
	tr, err := track.New()
	require.NoError(t, err)
	var pools []*pool.Pool
	src := report.Sources{}
	for i, name := range []string{"host:0", "host:1"} {
		dev, err := tensor.NewHostDevice(256*kib, tensor.DeviceName(name))
		require.NoError(t, err)
		p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(int64(64*(i+1))*kib))
		require.NoError(t, err)
		pools = append(pools, p)
		src.Pools = append(src.Pools, p)
		src.Devices = append(src.Devices, dev)
	}
	a, b := shard(t, pools[0], 16*kib), shard(t, pools[1], 48*kib)
	defer a.Free()
	defer b.Free()

	t.Run("summary", func(t *testing.T) {
		var sb strings.Builder
		require.NoError(t, report.WriteSummary(&sb, tr, report.WithSources(src)))
		text := sb.String()
		assert.Regexp(t, `(?m)^  host:0\s+16 KiB\s+16 KiB\s+0 B\s+16 KiB\s+16 KiB\s+64 KiB$`, text, "pool row")
		assert.Regexp(t, `(?m)^  host:1\s+48 KiB\s+48 KiB\s+0 B\s+48 KiB\s+48 KiB\s+128 KiB$`, text, "pool row")
		assert.Regexp(t, `(?m)^  host:0\s+16 KiB\s+16 KiB\s+0 B\s+240 KiB\s+256 KiB$`, text, "device row")
		assert.Regexp(t, `(?m)^  host:1\s+48 KiB\s+48 KiB\s+0 B\s+208 KiB\s+256 KiB$`, text, "device row")
	})
	t.Run("profile", func(t *testing.T) {
		srv := serve(t, newHandler(t, tr))
		for dev, want := range map[string]int64{"host:0": 16 * kib, "host:1": 48 * kib} {
			p := getProfile(t, srv.URL+tensorsPath+"?device="+dev)
			var bytes int64
			for _, s := range p.Sample {
				if s.Value[3] == 0 {
					continue // an alloc_* sample: per site, over every device
				}
				assert.Equal(t, []string{dev}, s.Label["device"])
				bytes += s.Value[3]
			}
			assert.Equal(t, want, bytes, "inuse_space on %s", dev)
			assert.Contains(t, strings.Join(p.Comments, "\n"), "device="+dev)
		}
		all := getProfile(t, srv.URL+tensorsPath)
		inuse := map[string]int64{}
		for _, s := range all.Sample {
			if s.Value[3] > 0 {
				require.Len(t, s.Label["device"], 1)
				inuse[s.Label["device"][0]] += s.Value[3]
			}
		}
		assert.Equal(t, map[string]int64{"host:0": 16 * kib, "host:1": 48 * kib}, inuse, "unfiltered, split by the device label")
	})
	t.Run("metrics", func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer mp.Shutdown(context.Background())
		m, err := oteltrack.Register(tr, oteltrack.WithMeterProvider(mp), oteltrack.WithSources(src))
		require.NoError(t, err)
		defer m.Stop()
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		got := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, md := range sm.Metrics {
				sum, ok := md.Data.(metricdata.Sum[int64])
				if !ok || (md.Name != "tensorlife.tensor.memory.usage" && md.Name != "tensorlife.device.memory.usage") {
					continue
				}
				for _, dp := range sum.DataPoints {
					dev, _ := dp.Attributes.Value("tensorlife.device")
					state, _ := dp.Attributes.Value("tensorlife.device.memory.state")
					got[md.Name+" "+dev.AsString()+" "+state.AsString()] += dp.Value
				}
			}
		}
		assert.Equal(t, map[string]int64{
			"tensorlife.tensor.memory.usage host:0 ": 16 * kib, "tensorlife.tensor.memory.usage host:1 ": 48 * kib,
			"tensorlife.device.memory.usage host:0 tensorlife": 16 * kib, "tensorlife.device.memory.usage host:1 tensorlife": 48 * kib,
			"tensorlife.device.memory.usage host:0 outside": 0, "tensorlife.device.memory.usage host:1 outside": 0,
			"tensorlife.device.memory.usage host:0 free": 240 * kib, "tensorlife.device.memory.usage host:1 free": 208 * kib,
		}, got)
	})
	t.Run("out of memory", func(t *testing.T) {
		_, err := tensor.New(context.Background(), pools[1], tensor.Uint8, 96*kib)
		var oom *tensor.OOMError
		require.ErrorAs(t, err, &oom)
		assert.Equal(t, "host:1", oom.Device)
		assert.Zero(t, oom.OtherReserved, "the pool on host:0 is not on this device")
		assert.Contains(t, oom.Error(), "out of memory on host:1")
	})
}

const tensorsPath = "/debug/pprof/tensors"

// serve serves h under tensorsPath for the test's life.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(tensorsPath, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func newHandler(t *testing.T, tr *track.Tracker) http.Handler {
	t.Helper()
	h, err := pprofexport.NewHandler(tr)
	require.NoError(t, err)
	return h
}

// getProfile fetches and parses a profile, failing the test on anything
// but a 200 with a valid profile.
func getProfile(t *testing.T, url string) *profile.Profile {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	p, err := profile.ParseData(body)
	require.NoError(t, err)
	return p
}
