package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/report"
)

// soakFor is how long TestSoakWithEvictions serves: TENSORLIFE_SOAK (a
// duration; scripts/stress-test.sh sets 45s), else a short run.
func soakFor(t *testing.T) (time.Duration, int) {
	if v := os.Getenv("TENSORLIFE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "TENSORLIFE_SOAK")
		return d, 0
	}
	return 0, 12 * 40 // requests, in short runs: bounded by count, not by a clock
}

// TestSoakWithEvictions is the fixed server under steady load with the
// default options: 12 clients, prompt lengths drawn from 1..512, so the
// prompt-mask cache evicts all the time. Not one suspect warning may be
// logged and the summary flags none; the -leak server under the same load
// is named.
func TestSoakWithEvictions(t *testing.T) {
	d, requests := soakFor(t)
	for _, leak := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "leak"}[leak], func(t *testing.T) {
			ts := startServer(t, func(c *config) { c.leak = leak })
			deadline := time.Now().Add(d)
			var served, next atomic.Int64
			var wg sync.WaitGroup
			for g := range 12 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 0x50a))
					for {
						if requests > 0 && next.Add(1) > int64(requests) {
							return
						}
						if requests == 0 && !time.Now().Before(deadline) { // a soak's length, not a wait
							return
						}
						if leak && ts.suspect() != nil {
							return // named: the leaky server runs out of memory next
						}
						q := fmt.Sprintf("prompt=%d&tokens=%d&batch=%d", 1+rng.IntN(512), 1+rng.IntN(16), 1+rng.IntN(2))
						o := ts.generate(q)
						if !assert.NoError(t, o.err) || !assert.Equal(t, http.StatusOK, o.status, o.body) {
							return
						}
						served.Add(1)
					}
				})
			}
			wg.Wait()
			t.Logf("%d requests served", served.Load())
			var summary strings.Builder
			require.NoError(t, report.WriteSummary(&summary, ts.tr))
			warnings := strings.Count(ts.logs.String(), "leak suspect")
			if leak {
				require.NotNil(t, ts.suspect(), "the leak is named")
				assert.Contains(t, ts.suspect().Site.Location().Function, "decodeLeaky")
				return
			}
			assert.Zero(t, warnings, "suspect warnings:\n%s", ts.logs.String())
			assert.Contains(t, summary.String(), "leak suspects flagged     0")
			assert.NotContains(t, ts.logs.String(), "owner over its bound")
			st := ts.lanes[0].prompts.Stats()
			assert.NotZero(t, st.Evictions, "the prompt cache evicted: the case under test")
		})
	}
}
