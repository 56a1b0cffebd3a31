//go:build cuda

package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor/devflag"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// The server on GPU 0 under concurrent load: every request is served, the
// metrics and the summary name the device, and shutdown leaves nothing on
// it; with the leak injected, shutdown names the leaking line. CI runs it on
// the fake driver (scripts/fakecuda.sh).
func TestOnCUDA(t *testing.T) {
	for _, leak := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "leak"}[leak], func(t *testing.T) {
			ts := startServer(t, func(c *config) { c.device, c.leak = devflag.List{{CUDA: true}}, leak })
			for i, o := range ts.load(64, 8, func(int) string { return "prompt=64&tokens=16&batch=2" }) {
				require.NoError(t, o.err, "request %d", i)
				require.Equal(t, http.StatusOK, o.status, "request %d: %s", i, o.body)
			}
			_, metrics := ts.get(t, ts.debug+"/metrics")
			v, ok := metric(metrics, "tensorlife_pool_memory_usage_bytes", `tensorlife_device="cuda:0"`)
			assert.True(t, ok, "no pool metric for cuda:0")
			assert.Positive(t, v)
			_, summary := ts.get(t, ts.debug+"/debug/tensors/summary")
			assert.Contains(t, summary, "cuda:0")

			err := ts.shutdown(t)
			if leak {
				require.Error(t, err)
				assert.Contains(t, err.Error(), leakFunc)
			} else {
				require.NoError(t, err)
				tracktest.VerifyNone(t, ts.tr)
			}
			assert.Zero(t, ts.lanes[0].dev.Blocks(), "shutdown gave every block back to the GPU")
			assert.True(t, strings.Contains(ts.report.String(), "cuda:0"), "the shutdown summary names the device")
		})
	}
}
