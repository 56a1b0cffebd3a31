package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Prometheus rules shipped in docs/alerts and their recorded test.
const (
	alertRules     = "../../docs/alerts/tensorlife.rules.yml"
	alertRulesTest = "../../docs/alerts/tensorlife.rules.test.yml"
)

var (
	// labelsOnly matches what names labels, not metrics: the lists of by,
	// without, on and ignoring, and the annotations' templates.
	labelsOnly = regexp.MustCompile(`\b(by|without|on|ignoring)\s*\([^)]*\)|\{\{[^}]*\}\}`)
	// selector matches a metric a rule reads, with its label matchers.
	selector = regexp.MustCompile(`\b(tensorlife_[a-z0-9_]+)(\{[^}]*\})?`)
	// recorded matches a series of the rule test's input.
	recorded = regexp.MustCompile(`series: '([a-z_]+)\{([^}]*)\}'`)
)

// The rules read metrics by the names OpenTelemetry's Prometheus exporter
// gives oteltrack's instruments: a rename there would leave alerts
// that never fire, and a recorded test that still passes. Every metric the
// rules name, with the label values they select, and every series of the
// recorded run, is on the leaky server's /metrics, under admission.
func TestAlertRulesReadTheServersMetrics(t *testing.T) {
	ts := startServer(t, func(c *config) { c.leak, c.admission = true, true })
	for i := range 40 {
		o := ts.generate(loadQuery(i))
		require.NoError(t, o.err)
		require.Equal(t, http.StatusOK, o.status, o.body)
	}
	status, m := ts.get(t, ts.debug+"/metrics")
	require.Equal(t, http.StatusOK, status)

	rules, err := os.ReadFile(alertRules)
	require.NoError(t, err)
	read := map[string]bool{}
	for _, match := range selector.FindAllStringSubmatch(labelsOnly.ReplaceAllString(string(rules), ""), -1) {
		name, matchers := match[1], strings.Trim(match[2], "{}")
		var want []string
		if matchers != "" {
			want = strings.Split(matchers, ",")
		}
		_, ok := metric(m, name, want...)
		assert.True(t, ok, "the rules read %s%s, which /metrics does not serve", name, match[2])
		read[name] = true
	}
	for _, name := range []string{"tensorlife_watcher_suspect_active", "tensorlife_watcher_suspect_runs_out_in_seconds", "tensorlife_pool_memory_limit_bytes",
		"tensorlife_pool_memory_usage_bytes", "tensorlife_device_memory_usage_bytes", "tensorlife_device_memory_limit_bytes",
		"tensorlife_pool_admissions_total"} {
		assert.True(t, read[name], "the rules read %s", name)
	}

	test, err := os.ReadFile(alertRulesTest)
	require.NoError(t, err)
	series := recorded.FindAllStringSubmatch(string(test), -1)
	require.NotEmpty(t, series)
	for _, s := range series {
		var want []string
		for _, l := range strings.Split(s[2], ",") {
			// job and instance are the scrape's; the scope's version is
			// the build's.
			if !strings.HasPrefix(l, "job=") && !strings.HasPrefix(l, "instance=") && !strings.HasPrefix(l, "otel_scope_version=") {
				want = append(want, l)
			}
		}
		_, ok := metric(m, s[1], want...)
		assert.True(t, ok, "the recorded series %s{%s} is not on /metrics", s[1], strings.Join(want, ","))
	}
}

// promtool runs the rules' own checks: check rules, and test rules on the
// recorded run of the leaky server, where every alert must fire when the
// test says and not before, and on the run without the leak, where none
// may. scripts/check-alerts.sh fetches promtool into .cache/promtool, where
// this test finds it too.
func TestAlertRulesFireOnTheRecordedLeak(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		promtool = filepath.Join("..", "..", ".cache", "promtool", "bin", "promtool")
		if _, err := os.Stat(promtool); err != nil {
			t.Skip("promtool not found on PATH or in .cache/promtool: scripts/check-alerts.sh fetches it")
		}
	}
	out, err := exec.Command(promtool, "check", "rules", alertRules).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "SUCCESS: 9 rules found")
	out, err = exec.Command(promtool, "test", "rules", alertRulesTest).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "SUCCESS")
}
