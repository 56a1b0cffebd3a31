package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/benchratio"
)

// burstResult is what a burst of long prompts came to.
type burstResult struct {
	ok, oom, refused int
	wall             time.Duration
}

// goodPerSecond is the burst's throughput: admitted requests completed
// without running out, per second of the burst.
func (r burstResult) goodPerSecond() float64 { return float64(r.ok) / r.wall.Seconds() }

func (r burstResult) String() string {
	return fmt.Sprintf("%2d completed, %2d out of memory, %2d refused, %.1f completed/s", r.ok, r.oom, r.refused, r.goodPerSecond())
}

// longPrompt is request i of the burst: prompts of 384 to 504 tokens, each
// generating 512 for a batch of 8.
func longPrompt(i int) string {
	return fmt.Sprintf("prompt=%d&tokens=512&batch=8", 384+8*i)
}

// runMixedBurst sends 30 short requests one by one, then a burst of 16
// long prompts of mixed sizes at once, held together at steps 0, 256 and
// 448 (as runBurst holds them: each hold waits for every request of the
// burst to reach it or end), to a server admitting with or without
// per-request sizes. At step 448 the 16 would hold 14 MiB of KV cache
// pages alone, more than the 12.4 MiB budget.
func runMixedBurst(t testing.TB, sized bool) (*testServer, burstResult) {
	const n = 16
	b := newBurstStep(n, 0, 4*kvPage, 7*kvPage)
	edit := burstConfig(true)
	ts := startServer(t, func(c *config) {
		edit(c)
		c.sized = sized
		c.hookStep = b.hook
	})
	for i := range 30 {
		o := ts.generate("prompt=64&tokens=16")
		require.NoError(t, o.err)
		require.Equal(t, http.StatusOK, o.status, "short request %d: %s", i, o.body)
	}
	b.on.Store(true)
	start := time.Now()
	out := ts.load(n, n, longPrompt)
	var r burstResult
	r.wall = time.Since(start)
	for i, o := range out {
		require.NoError(t, o.err, "request %d", i)
		switch {
		case o.status == http.StatusOK:
			r.ok++
		case o.status == http.StatusServiceUnavailable && strings.HasPrefix(o.body, "out of memory"):
			r.oom++
		case o.status == http.StatusServiceUnavailable && strings.HasPrefix(o.body, "busy: the memory budget"):
			r.refused++
		default:
			t.Errorf("request %d: status %d: %s", i, o.status, o.body)
		}
	}
	return ts, r
}

// After 30 short requests, a burst of 16 long prompts of mixed sizes:
// admitted by their kind's p99 peak (one figure per kind, of the short
// requests) they are all admitted and memory runs out inside some of them;
// sized, none runs out. Throughput, a rate, is a benchmark's
// (BenchmarkSizedAdmissionBurst); the figures are printed.
func TestSizedAdmissionBurstRunsNoneOutOfMemory(t *testing.T) {
	_, fixed := runMixedBurst(t, false)
	tsSized, sized := runMixedBurst(t, true)
	t.Logf("per kind (p99): %v", fixed)
	t.Logf("sized:          %v", sized)

	assert.Positive(t, fixed.oom, "the kind's p99 admits long prompts on a short request's reservation")
	assert.Zero(t, sized.oom, "no admitted request ran out of memory")
	assert.Positive(t, sized.ok)
	assert.Equal(t, 16, sized.ok+sized.refused)
	for _, l := range tsSized.lanes {
		s := l.pool.Stats()
		assert.Zero(t, s.OOMs, "no allocation ran out of memory")
		assert.Zero(t, s.Admissions, "every reservation was released")
		require.NotEmpty(t, s.AdmissionKinds)
		k := s.AdmissionKinds[0]
		assert.Equal(t, `route=POST /generate`, k.Kind)
		assert.EqualValues(t, 30+sized.ok, k.Admitted)
		assert.EqualValues(t, sized.refused, k.Refused)
		assert.Zero(t, k.RanOut)
	}
}

// BenchmarkSizedAdmissionBurst runs the burst of
// TestSizedAdmissionBurstRunsNoneOutOfMemory on fresh servers, admitting
// by the kind's p99 and sized, in alternating rounds, and reports the
// median over rounds of the time per request completed without running
// out, sized over per kind: x-sized-time-per-good ≤ 1 is a throughput
// (admitted requests completed without running out, per second) no lower
// than the per-kind reservation's. It reports the completed and
// out-of-memory requests per burst of each.
func BenchmarkSizedAdmissionBurst(b *testing.B) {
	var fixedPer, sizedPer []time.Duration
	var fixedOK, fixedOOM, sizedOK, sizedOOM int
	burst := func(sized bool) burstResult {
		ts, r := runMixedBurst(b, sized)
		if err := ts.shutdown(b); err != nil {
			b.Fatal(err)
		}
		return r
	}
	for i := range b.N {
		var f, s burstResult
		if i%2 == 0 {
			f, s = burst(false), burst(true)
		} else {
			s, f = burst(true), burst(false)
		}
		if f.ok == 0 || s.ok == 0 {
			b.Fatalf("a burst completed nothing: per kind %v, sized %v", f, s)
		}
		fixedPer = append(fixedPer, f.wall/time.Duration(f.ok))
		sizedPer = append(sizedPer, s.wall/time.Duration(s.ok))
		fixedOK, fixedOOM, sizedOK, sizedOOM = fixedOK+f.ok, fixedOOM+f.oom, sizedOK+s.ok, sizedOOM+s.oom
	}
	ratio, err := benchratio.MedianRatio(sizedPer, fixedPer)
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	b.ReportMetric(ratio, "x-sized-time-per-good")
	b.ReportMetric(float64(sizedOK)/n, "sized-good/burst")
	b.ReportMetric(float64(sizedOOM)/n, "sized-oom/burst")
	b.ReportMetric(float64(fixedOK)/n, "perkind-good/burst")
	b.ReportMetric(float64(fixedOOM)/n, "perkind-oom/burst")
}

// With -leak -admission the leaked masks take the budget from the
// reservations: requests are admitted until no reservation fits, then
// refused, more every step, on /metrics as in the log, while the watcher
// names the leak's line throughout.
func TestLeakUnderAdmissionRefusalsRiseWhileTheLeakIsNamed(t *testing.T) {
	ts := startServer(t, func(c *config) {
		c.leak, c.admission = true, true
		c.budget, c.cache = 12<<20, 2<<20
	})
	var refusedBySteps []float64
	for step := range 60 {
		for range 10 {
			o := ts.generate("prompt=64&tokens=32&batch=2")
			require.NoError(t, o.err)
			require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, o.status, o.body)
			if o.status == http.StatusServiceUnavailable {
				require.True(t, strings.HasPrefix(o.body, "busy: the memory budget"), "step %d: %s", step, o.body)
			}
		}
		status, m := ts.get(t, ts.debug+"/metrics")
		require.Equal(t, http.StatusOK, status)
		refused, ok := metric(m, "tensorlife_pool_admissions_total", `tensorlife_admission_result="refused"`)
		require.True(t, ok, "step %d: the refusals are on /metrics from the first request", step)
		refusedBySteps = append(refusedBySteps, refused)
		if refused > 0 {
			sus := ts.watcher.Suspects()
			require.NotEmpty(t, sus, "step %d: refusing, and the leak is no longer named", step)
			assert.Contains(t, sus[0].Site.Location().Function, "decodeLeaky", "step %d", step)
		}
	}
	t.Logf("refused by step: %v", refusedBySteps)
	first := slices.IndexFunc(refusedBySteps, func(v float64) bool { return v > 0 })
	require.GreaterOrEqual(t, first, 0, "the leak filled the budget: admission refused")
	assert.Greater(t, first, 0, "the first step admitted every request")
	for i := first + 1; i < len(refusedBySteps); i++ {
		assert.Greater(t, refusedBySteps[i], refusedBySteps[i-1], "refusals rise at step %d", i)
	}
	assert.Equal(t, int64(refusedBySteps[len(refusedBySteps)-1]), ts.refused.Load())
	for _, l := range ts.lanes {
		assert.Zero(t, l.pool.Stats().OOMs, "admitted requests never ran out: they were refused before")
	}
}
