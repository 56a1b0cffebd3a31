package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track/watch"
)

// The -leak server on its default 64 MiB budget, sent long prompts one at
// a time until the leaked masks fill the budget and every request runs out
// of memory: the watcher keeps the leak named through the end (the metric
// stays 1, the summary at shutdown names the line and says its memory ran
// out), each out-of-memory diagnosis is logged a line a field, and the
// profiles carry each tensor's route and request. Windows are requests
// (one Tick each): nothing here depends on time.
func TestLeakThatFillsTheBudgetStaysNamed(t *testing.T) {
	ts := startServer(t, func(c *config) { c.leak = true })
	require.Equal(t, int64(64<<20), ts.cfg.budget)
	active := func() float64 {
		_, m := ts.get(t, ts.debug+"/metrics")
		v, ok := metric(m, "tensorlife_watcher_suspect_active")
		require.True(t, ok, "tensorlife_watcher_suspect_active is on /metrics")
		return v
	}
	const query = "prompt=128&tokens=128&batch=8"
	served, ooms := 0, 0
	for range 300 { // about 770 KiB leaked a request: the budget is full within 90
		o := ts.generate(query)
		require.NoError(t, o.err)
		if o.status == http.StatusServiceUnavailable && strings.Contains(o.body, "out of memory") {
			ooms++
			break
		}
		require.Equal(t, http.StatusOK, o.status, o.body)
		served++
	}
	require.Equal(t, 1, ooms, "the leak filled the budget")
	require.NotNil(t, ts.suspect(), "named while it grew")
	t.Logf("budget full after %d requests", served)
	// More than the 2·K quiet windows that clear a plateau below the budget.
	after := 4 * watch.DefaultWindows
	for i := range after {
		o := ts.generate(query)
		require.NoError(t, o.err)
		if o.status == http.StatusServiceUnavailable {
			ooms++
		}
		if i%8 == 7 {
			assert.Equal(t, 1.0, active(), "still a suspect %d requests after the budget was full", i+1)
		}
	}
	assert.Greater(t, ooms, after/2, "the budget stays full")
	_, m := ts.get(t, ts.debug+"/metrics")
	now, _ := metric(m, "tensorlife_watcher_suspect_active")
	assert.Equal(t, 1.0, now)
	t.Logf("%d more requests, %d of them out of memory: tensorlife_watcher_suspect_active %v", after, ooms-1, now)
	left, ok := metric(m, "tensorlife_watcher_suspect_runs_out_in_seconds", `tensorlife_device="host"`)
	assert.True(t, ok, "the forecast series stays")
	assert.Zero(t, left, "it has run out")
	t.Logf("tensorlife_watcher_suspect_runs_out_in_seconds{tensorlife_device=\"host\"} %v", left)

	// The profiles carry the route and the request of each tensor.
	resp, err := ts.client.Get(ts.debug + "/debug/pprof/tensors")
	require.NoError(t, err)
	p, err := profile.Parse(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	labelled := 0
	for _, s := range p.Sample {
		if len(s.Label["route"]) > 0 && len(s.Label["request"]) > 0 {
			labelled++
			assert.Equal(t, []string{"POST /generate"}, s.Label["route"])
		}
	}
	assert.Positive(t, labelled, "samples labelled with their route and request")

	require.ErrorIs(t, ts.shutdown(t), errLiveAtShutdown)
	summary := ts.report.String()
	i := strings.Index(summary, "\nLeak suspects")
	require.Positive(t, i, summary)
	suspects := summary[i:]
	if j := strings.Index(suspects[1:], "\n\n"); j > 0 {
		suspects = suspects[:j+2]
	}
	t.Logf("the summary at shutdown:%s", suspects)
	assert.NotContains(t, suspects, "  none")
	assert.Contains(t, suspects, "decodeLeaky (generate.go:", "the summary names the leaking line")
	assert.Contains(t, strings.Join(strings.Fields(suspects), " "),
		"memory ran out: ", "and says its memory ran out")

	logs := ts.logs.String()
	assert.Contains(t, logs, "the memory it draws from ran out; it stays a suspect")
	oomLine := regexp.MustCompile(`(?m)^.*msg="out of memory".*$`)
	records := oomLine.FindAllString(logs, -1)
	require.NotEmpty(t, records)
	for _, r := range records {
		assert.NotContains(t, r, `\n`, "the diagnosis is logged a line a field")
		assert.Contains(t, r, `err.error="step `)
		assert.Contains(t, r, `err.line01="  reserved `)
	}
	t.Logf("the first out-of-memory record of the log:\n%s", strings.ReplaceAll(records[0], `" err.`, "\"\n  err."))
}
