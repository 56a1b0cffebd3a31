package main

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// leakFunc and promptFunc end the names of the leaking function and of the
// prompt-mask builder as frames give them. Under go test the package is
// not named main, so only the suffix is stable.
const (
	leakFunc   = ".(*server).decodeLeaky"
	promptFunc = ".(*server).buildPromptMask"
)

// The end-to-end load: a few hundred requests, many at once, over four
// prompt lengths (so four prompt masks are cached) and two batch sizes.
const (
	loadRequests = 300
	loadWorkers  = 16
	loadTokens   = 8
)

var loadPrompts = []int{32, 48, 64, 96}

func loadQuery(i int) string {
	return fmt.Sprintf("prompt=%d&tokens=%d&batch=%d", loadPrompts[i%len(loadPrompts)], loadTokens, 1+i%2)
}

// TestEndToEnd runs the fixed and the leaky server through the same load
// and reads them as an operator would: /metrics, go tool pprof on the
// profile URL, the watcher's log, and the shutdown report.
func TestEndToEnd(t *testing.T) {
	for _, leak := range []bool{false, true} {
		name := "fixed"
		if leak {
			name = "leak"
		}
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, func(c *config) { c.leak = leak })

			outcomes := ts.load(loadRequests, loadWorkers, loadQuery)
			ids := map[string]bool{}
			for i, o := range outcomes {
				require.NoError(t, o.err, "request %d", i)
				require.Equal(t, http.StatusOK, o.status, "request %d: %s", i, o.body)
				assert.Equal(t, name, o.resp.Mode)
				assert.Equal(t, loadTokens, o.resp.Tokens)
				ids[o.resp.Request] = true
			}
			assert.Len(t, ids, loadRequests, "every request has its own id")

			checkMetrics(t, ts, leak)
			checkProfile(t, ts, leak)
			checkShutdown(t, ts, leak)
		})
	}
}

// leakedMasks is how many masks the leaky server keeps: one per step.
const leakedMasks = loadRequests * loadTokens

func checkMetrics(t *testing.T, ts *testServer, leak bool) {
	status, m := ts.get(t, ts.debug+"/metrics")
	require.Equal(t, http.StatusOK, status)
	value := func(name string, labels ...string) float64 {
		v, ok := metric(m, name, labels...)
		require.True(t, ok, "/metrics has no %s%v", name, labels)
		return v
	}
	// The exposition passes the checks promtool check metrics runs.
	problems, err := promlint.New(strings.NewReader(m)).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems, "promlint")
	cached := float64(len(loadPrompts))
	assert.Equal(t, float64(loadRequests), value("tensorlife_watcher_windows_total"),
		"one window per request, the warm-up included")
	assert.Equal(t, cached, value("tensorlife_mask_cache_entry_live", `tensorlife_cache_name="prompt-masks"`))
	assert.GreaterOrEqual(t, value("tensorlife_tensor_allocations_total"), float64(loadRequests*(1+loadTokens)),
		"a KV cache and a logits tensor per step, at least")
	assert.Equal(t, float64(ts.cfg.budget), value("tensorlife_pool_memory_limit_bytes", `tensorlife_device="host"`))
	reserved := value("tensorlife_pool_memory_usage_bytes", `tensorlife_device="host"`) // active + cached
	assert.Positive(t, reserved)
	assert.LessOrEqual(t, reserved, float64(ts.cfg.budget))
	assert.Equal(t, float64(ts.cfg.capacity), value("tensorlife_device_memory_limit_bytes", `tensorlife_device="host"`))
	assert.Equal(t, reserved, value("tensorlife_device_memory_usage_bytes", `tensorlife_device="host"`, `tensorlife_device_memory_state="tensorlife"`),
		"the pool is the device's only user")
	assert.Zero(t, value("tensorlife_device_memory_usage_bytes", `tensorlife_device="host"`, `tensorlife_device_memory_state="outside"`),
		"nothing on the device is outside tensorlife")
	_, isGPU := metric(m, "hw_gpu_memory_usage_bytes")
	assert.False(t, isGPU, "the host device is no GPU")
	assert.Zero(t, value("tensorlife_tensor_oom_errors_total"))
	assert.Zero(t, value("tensorlife_tensor_leaks_total"))
	// No request is running: nothing but masks is live.
	assert.Equal(t, value("tensorlife_tensor_live"), value("tensorlife_tensor_live", `tensorlife_tensor_kind="mask"`))

	masks := value("tensorlife_tensor_live", `tensorlife_tensor_kind="mask"`)
	// The count of sites ever flagged: a suspect stops being one when its
	// growth stops, as the leak's does when the load ends.
	flagged := value("tensorlife_watcher_flags_total")
	rebuilds := value("tensorlife_mask_rebuilds_total")
	if leak {
		assert.Equal(t, cached+leakedMasks, masks, "the cached prompt masks and every step's mask")
		assert.Equal(t, float64(loadRequests*(loadTokens-1)), rebuilds, "every step after the first rebuilds")
		assert.GreaterOrEqual(t, flagged, 1.0)
	} else {
		assert.Equal(t, cached, masks, "only the cached prompt masks")
		assert.Zero(t, rebuilds)
		assert.Zero(t, flagged)
		assert.Zero(t, value("tensorlife_watcher_suspect_active"))
		// The cache's usage is what its budget counts: the masks, then
		// each entry's key ("causal/<prompt>") and overhead.
		var entries float64
		for _, p := range loadPrompts {
			entries += float64(len("causal/"+strconv.Itoa(p)) + mask.CacheEntryOverhead)
		}
		assert.Equal(t, value("tensorlife_mask_cache_memory_usage_bytes")-entries, value("tensorlife_tensor_memory_usage_bytes"),
			"every live byte is in the prompt-mask cache")
	}
}

func checkProfile(t *testing.T, ts *testServer, leak bool) {
	rows := flatRows(pprofTop(t, ts.debug+"/debug/pprof/tensors", "-sample_index=inuse_space"))
	require.NotEmpty(t, rows)
	if leak {
		assert.True(t, strings.HasSuffix(rows[0], leakFunc), "the leaking function tops the profile: %q", rows)
		return
	}
	// What is live after the requests is the bounded prompt-mask cache.
	for _, r := range rows {
		assert.True(t, strings.HasSuffix(r, promptFunc) || strings.HasSuffix(r, promptFunc+" (inline)"),
			"only cached prompt masks are live: %q", r)
	}
}

func checkShutdown(t *testing.T, ts *testServer, leak bool) {
	err := ts.shutdown(t)
	report := ts.report.String()
	logs := ts.logs.String()
	if leak {
		require.ErrorIs(t, err, errLiveAtShutdown)
		var live *liveTensorsError
		require.True(t, errors.As(err, &live))
		assert.Equal(t, int64(leakedMasks), live.count, "the shutdown report counts every leaked mask")
		require.NotEmpty(t, live.sites)
		assert.True(t, strings.HasSuffix(live.sites[0].Site.Location().Function, leakFunc), err.Error())
		assert.Contains(t, err.Error(), "generate.go:")

		sus := ts.suspect()
		require.NotNil(t, sus, "the watcher named a suspect")
		assert.True(t, strings.HasSuffix(sus.Site.Location().Function, leakFunc), sus.Site.String())
		t.Logf("the watcher named the leak after %d requests", sus.SinceWindow)
		assert.Contains(t, logs, "leak suspect")
		// The warning carries what the watcher's own log line does, which
		// the alert rules send the operator to (docs/alerts).
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, "leak suspect") {
				assert.Regexp(t, `runs_out_in=\S+`, line)
				assert.Regexp(t, `runs_out_of="?[a-z]`, line, "the forecast says what runs out")
				assert.Contains(t, line, "advice=")
			}
		}
		assert.Contains(t, logs, "tensors still live at shutdown")
		_, sites, _ := strings.Cut(report, "Top sites by live bytes")
		sites, _, _ = strings.Cut(sites, "Leak suspects")
		assert.Regexp(t, `\n\s+1 .*decodeLeaky \(generate\.go:\d+\)\n`, sites, "the leak is the top site")
	} else {
		require.NoError(t, err)
		assert.Nil(t, ts.suspect(), "no site kept growing")
		assert.NotContains(t, logs, "leak suspect")
		assert.Contains(t, report, "nothing is live")
	}
	// Either way, shutdown freed everything and gave the device back.
	tracktest.VerifyNone(t, ts.tr)
	assert.Zero(t, ts.lanes[0].dev.Used())
	assert.Zero(t, ts.lanes[0].dev.Blocks())
}
