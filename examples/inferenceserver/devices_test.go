package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/tensor/devflag"
)

// Two host devices stand in for two GPUs: requests alternate between them,
// one pool each on one tracker, and the summary, the metrics and the
// profile split by device, each with its own figures.
func TestTwoDevicesSplitTheReports(t *testing.T) {
	ts := startServer(t, func(c *config) { c.device, c.leak = devflag.List{{}, {}}, true })
	require.Len(t, ts.lanes, 2)
	// Three requests on host:0, two on host:1: every step's mask is kept.
	for range 5 {
		require.Equal(t, http.StatusOK, ts.generate("prompt=16&tokens=4").status)
	}

	status, summary := ts.get(t, ts.debug+"/debug/tensors/summary")
	require.Equal(t, http.StatusOK, status)
	pools := summary[strings.Index(summary, "\nPools"):strings.Index(summary, "\nCaches")]
	devices := summary[strings.Index(summary, "\nDevices"):]
	row := func(section, dev string) string {
		m := regexp.MustCompile(`(?m)^  ` + dev + ` +(\S+ \S+) +(\S+ \S+)`).FindStringSubmatch(section)
		require.NotNil(t, m, "%s in %q", dev, section)
		return m[1] + " | " + m[2]
	}
	assert.NotEqual(t, row(pools, "host:0"), row(pools, "host:1"), "each pool has its own figures")
	assert.NotEqual(t, row(devices, "host:0"), row(devices, "host:1"), "each device has its own figures")
	assert.Contains(t, summary, "prompts@host:0")
	assert.Contains(t, summary, "prompts@host:1")

	_, m := ts.get(t, ts.debug+"/metrics")
	usage := map[string]float64{}
	for _, dev := range []string{"host:0", "host:1"} {
		v, ok := metric(m, "tensorlife_pool_memory_usage_bytes", `tensorlife_device="`+dev+`"`)
		require.True(t, ok, "pool usage of %s", dev)
		usage[dev] = v
		tl, ok := metric(m, "tensorlife_device_memory_usage_bytes", `tensorlife_device="`+dev+`"`, `tensorlife_device_memory_state="tensorlife"`)
		require.True(t, ok, "device usage of %s", dev)
		assert.Equal(t, v, tl, "the pool is %s's only user", dev)
	}
	assert.Greater(t, usage["host:0"], usage["host:1"], "host:0 served one request more")

	inuse := map[string]int64{}
	for _, dev := range []string{"host:0", "host:1"} {
		resp, err := ts.client.Get(ts.debug + "/debug/pprof/tensors?device=" + dev)
		require.NoError(t, err)
		p, err := profile.Parse(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		idx := -1
		for i, st := range p.SampleType {
			if st.Type == "inuse_space" {
				idx = i
			}
		}
		require.GreaterOrEqual(t, idx, 0)
		for _, s := range p.Sample {
			if s.Value[idx] > 0 {
				assert.Equal(t, []string{dev}, s.Label[pprofexport.LabelDevice], "the filtered profile holds %s alone", dev)
				inuse[dev] += s.Value[idx]
			}
		}
	}
	assert.Greater(t, inuse["host:0"], inuse["host:1"], "host:0 holds one request's masks more")
	assert.Positive(t, inuse["host:1"])
}
