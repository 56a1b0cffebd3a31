package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentLoadIsJudgedByLifetime serves 64 clients at once, with
// requests of varied prompts, lengths and batches overlapping each other
// for many windows: the fixed server, whose requests free what they make,
// gets no leak suspect however much memory is in flight at each window's
// end; the leaky one, whose masks outlive their requests, is named.
func TestConcurrentLoadIsJudgedByLifetime(t *testing.T) {
	const clients, requests = 64, 64 * 12
	query := func(i int) string {
		prompts := []int{16, 32, 48, 64, 96, 128}
		return fmt.Sprintf("prompt=%d&tokens=%d&batch=%d", prompts[i%len(prompts)], 4+i*7%29, 1+i%3)
	}
	for _, leak := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "leak"}[leak], func(t *testing.T) {
			ts := startServer(t, func(c *config) {
				c.leak = leak
				c.maxInFlight = clients
				c.budget, c.capacity = 512<<20, 1<<30
				c.maxPrompt, c.maxTokens, c.maxBatch = 128, 32, 4
			})
			for i, o := range ts.load(requests, clients, query) {
				require.NoError(t, o.err, "request %d", i)
				require.Equal(t, http.StatusOK, o.status, "request %d: %s", i, o.body)
			}
			if leak {
				sus := ts.suspect()
				require.NotNil(t, sus, "the leak is named under concurrent load")
				assert.Contains(t, sus.Site.Location().Function, "decodeLeaky")
			} else {
				assert.Nil(t, ts.suspect(), "memory in flight is never judged, however many requests overlap")
			}
		})
	}
}
