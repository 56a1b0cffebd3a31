package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
)

// Two host devices stand in for two GPUs: the requests alternate between
// them, and the summary and the profile split the leak by device, each
// with its own figures.
func TestTwoDevicesSplitTheReports(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "tensors.pb.gz")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-device", "host,host", "-requests", "17", "-profile", prof}, &out, false))
	text := out.String()

	// One pool line and one device line per device, and the caches too.
	for _, dev := range []string{"host:0", "host:1"} {
		assert.Regexp(t, `(?m)^  `+dev+` +\d`, text, "a pool line of %s", dev)
		assert.Contains(t, text, "prompts@"+dev)
	}
	devices := text[strings.Index(text, "\nDevices"):]
	pools := text[strings.Index(text, "\nPools"):strings.Index(text, "\nCaches")]
	reserved := func(section, dev string) string {
		m := regexp.MustCompile(`(?m)^  ` + dev + ` +(\S+ \S+) +(\S+ \S+)`).FindStringSubmatch(section)
		require.NotNil(t, m, "%s in %q", dev, section)
		return m[1] + " | " + m[2]
	}
	// 17 requests: 9 on host:0, 8 on host:1, so the figures differ.
	assert.NotEqual(t, reserved(pools, "host:0"), reserved(pools, "host:1"), "each pool has its own figures")
	assert.NotEqual(t, reserved(devices, "host:0"), reserved(devices, "host:1"), "each device has its own figures")

	f, err := os.Open(prof)
	require.NoError(t, err)
	defer f.Close()
	p, err := profile.Parse(f)
	require.NoError(t, err)
	inuse := sampleIndex(t, p, "inuse_space")
	byDevice := map[string]int64{}
	for _, s := range p.Sample {
		if s.Value[inuse] == 0 {
			continue // a site's allocations with nothing live
		}
		require.Len(t, s.Label[pprofexport.LabelDevice], 1, "every sample names its device")
		byDevice[s.Label[pprofexport.LabelDevice][0]] += s.Value[inuse]
	}
	assert.Len(t, byDevice, 2)
	assert.Greater(t, byDevice["host:0"], byDevice["host:1"], "host:0 served one request more, all leaked")
	assert.Positive(t, byDevice["host:1"])
}

// One device keeps the names of a single-device run: no device suffix on
// the cache; its memory split is the one row of the Devices section, which
// the summary finds on the tracker with the pool.
func TestOneDeviceKeepsTheSummary(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-requests", "4", "-profile", ""}, &out, false))
	text := out.String()
	assert.Regexp(t, `(?m)^  host +\d`, text)
	assert.Contains(t, text, "prompt-masks ")
	assert.NotContains(t, text, "host:0")
	assert.Regexp(t, `\nDevices \(.*\n.*\n  host +\d`, text)
}
