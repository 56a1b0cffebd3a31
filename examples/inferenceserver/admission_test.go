package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// burstConfig is a budget that holds 4 of the largest requests next to the
// prompt-mask cache, with 16 allowed in flight.
func burstConfig(admission bool) func(*config) {
	return func(c *config) {
		c.maxPrompt, c.maxTokens, c.maxBatch = 512, 512, 8
		c.cache = 2 << 20
		c.budget = c.cache + 4*requestBytes(c.maxPrompt, c.maxTokens, c.maxBatch)
		c.maxInFlight = 16
		c.admission = admission
		c.overcommit = !admission // the start-up check relaxed for the test
	}
}

// burstStep holds every request of a burst of n at each of the decode
// steps at until each of the n has reached it or ended: the burst's
// requests then hold their memory at once, whatever the scheduler does.
type burstStep struct {
	n       int
	at      []int
	on      atomic.Bool // off for the warm-up request
	mu      sync.Mutex
	arrived []map[string]bool // by hold point
	all     []chan struct{}
}

func newBurstStep(n int, at ...int) *burstStep {
	b := &burstStep{n: n, at: at}
	for range at {
		b.arrived = append(b.arrived, make(map[string]bool))
		b.all = append(b.all, make(chan struct{}))
	}
	return b
}

func (b *burstStep) hook(ctx context.Context, step int) {
	if !b.on.Load() {
		return
	}
	id, _ := track.LabelsFrom(ctx).Get("request")
	b.mu.Lock()
	wait := -1
	for i, at := range b.at {
		// An ended request has arrived at every hold point.
		if (step == at || step == stepEnded) && !b.arrived[i][id] {
			b.arrived[i][id] = true
			if len(b.arrived[i]) == b.n {
				close(b.all[i])
			}
		}
		if step == at {
			wait = i
		}
	}
	b.mu.Unlock()
	if wait >= 0 {
		select {
		case <-b.all[wait]:
		case <-ctx.Done():
		}
	}
}

// runBurst warms the prompt-mask cache with one long prompt, then sends a
// burst of 16 long prompts at once, held together at step 0 (their
// prompts in: 8 KV pages each, which the budget holds for 16) and at step
// 256 (13 pages each: more than the budget holds for 16 of them).
func runBurst(t *testing.T, admission bool) (*testServer, []outcome) {
	const n = 16
	long := "prompt=512&tokens=512&batch=8"
	b := newBurstStep(n, 0, 4*kvPage)
	edit := burstConfig(admission)
	ts := startServer(t, func(c *config) {
		edit(c)
		c.hookStep = b.hook
	})
	require.Equal(t, http.StatusOK, ts.generate(long).status)
	b.on.Store(true)
	return ts, ts.load(n, n, func(int) string { return long })
}

// With admission, a burst of long prompts beyond what the budget holds is
// refused at admission (503 with Retry-After, before any memory is taken);
// every admitted request completes, and no request runs out of memory.
func TestAdmissionRefusesBurstBeforeMemoryRunsOut(t *testing.T) {
	ts, out := runBurst(t, true)
	var ok, refused int
	for i, o := range out {
		require.NoError(t, o.err, "request %d", i)
		switch o.status {
		case http.StatusOK:
			ok++
		case http.StatusServiceUnavailable:
			refused++
			assert.Equal(t, "1", o.retryAfter, "request %d", i)
			assert.Contains(t, o.body, "busy: the memory budget holds no more requests like this one now", "request %d", i)
		default:
			t.Errorf("request %d: status %d: %s", i, o.status, o.body)
		}
	}
	assert.Equal(t, 4, ok, "the budget holds the reservations of 4 of the largest requests")
	assert.Equal(t, 12, refused)
	assert.EqualValues(t, 12, ts.refused.Load())
	logs := ts.logs.String()
	assert.NotContains(t, logs, `msg="out of memory"`)
	assert.Equal(t, 12, strings.Count(logs, `msg="admission refused"`))
	assert.Contains(t, logs, `needs its fallback reservation (too little history)`)
	for _, l := range ts.lanes {
		s := l.pool.Stats()
		assert.Zero(t, s.OOMs, "no allocation ran out of memory")
		assert.Zero(t, s.Admissions, "every reservation was released")
	}
}

// Without admission (and the start-up check relaxed), the same burst runs
// all 16 requests, and memory runs out mid-generation.
func TestNoAdmissionBurstRunsOutMidGeneration(t *testing.T) {
	ts, out := runBurst(t, false)
	var ok, oom int
	for i, o := range out {
		require.NoError(t, o.err, "request %d", i)
		switch {
		case o.status == http.StatusOK:
			ok++
		case o.status == http.StatusServiceUnavailable && strings.HasPrefix(o.body, "out of memory"):
			oom++
		default:
			t.Errorf("request %d: status %d: %s", i, o.status, o.body)
		}
	}
	assert.Positive(t, oom)
	assert.Equal(t, 16, ok+oom)
	logs := ts.logs.String()
	assert.Contains(t, logs, `msg="out of memory"`)
	assert.Regexp(t, `msg="out of memory" request=r[0-9a-f]+ err.error="step \d+: `, logs, "memory ran out mid-generation")
}

// With -admission the start-up check counts reservations: a budget that
// holds one largest request next to the cache is enough, whatever
// -max-inflight; one that holds none is refused.
func TestAdmissionStartupCheckCountsReservations(t *testing.T) {
	c := defaultConfig()
	c.maxInFlight = 64
	c.budget = c.cache + 2*requestBytes(c.maxPrompt, c.maxTokens, c.maxBatch)
	require.ErrorIs(t, c.validate(), errBadConfig, "without admission: 64 of the largest must fit")
	c.admission = true
	require.NoError(t, c.validate())
	c.budget = c.cache + requestBytes(c.maxPrompt, c.maxTokens, c.maxBatch) - 1
	err := c.validate()
	require.ErrorIs(t, err, errBadConfig)
	assert.Contains(t, err.Error(), "with -admission no such request could ever be admitted")
}

// A reservation is released before the answer is written: with a budget
// that holds one largest request, requests sent one after another are
// each admitted.
func TestAdmissionReleasesBeforeAnswering(t *testing.T) {
	ts := startServer(t, func(c *config) {
		c.maxPrompt, c.maxTokens, c.maxBatch = 512, 512, 8
		c.cache = 2 << 20
		c.budget = c.cache + requestBytes(c.maxPrompt, c.maxTokens, c.maxBatch)
		c.admission = true
	})
	for i := range 5 {
		o := ts.generate("prompt=512&tokens=512&batch=8")
		require.NoError(t, o.err)
		require.Equal(t, http.StatusOK, o.status, "request %d: %s", i, o.body)
	}
	assert.Zero(t, ts.refused.Load())
}
