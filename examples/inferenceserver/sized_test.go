package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/report"
	"github.com/tensorlife/tensorlife/track"
)

// burstResult is what a burst of long prompts came to.
type burstResult struct {
	ok, oom, refused int
	wall             time.Duration
	// p99 is the kind's p99 peak before the burst: what admission by
	// kind reserved for each of its requests.
	p99 int64
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

// lockstep runs a burst's requests turn by turn: each is sent once the one
// before it has reached its first decode step or ended (so admission and
// prefill go one at a time, in order), and once all have, each decode step
// of each live request runs alone, in the order they were sent, round and
// round. What the burst's requests hold at each moment, and so which of
// them run out of memory, is the same on every run.
type lockstep struct {
	n       int
	on      atomic.Bool // off for the warm-up requests
	mu      sync.Mutex
	cond    *sync.Cond
	order   []string // live requests, in the order they arrived
	arrived int      // requests that reached their first step or ended
	turn    int      // index into order of the request whose step runs
	running bool     // the holder of turn runs its step
	events  chan struct{}
}

func newLockstep(n int) *lockstep {
	l := &lockstep{n: n, events: make(chan struct{}, n)}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *lockstep) hook(ctx context.Context, step int) {
	if !l.on.Load() {
		return
	}
	id, _ := track.LabelsFrom(ctx).Get("request")
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.Index(l.order, id)
	if i < 0 { // its first step, or refused
		l.arrived++
		l.events <- struct{}{}
		l.cond.Broadcast()
		if step == stepEnded {
			return
		}
		l.order = append(l.order, id)
	} else {
		// Its last step is done: the turn goes on.
		l.running = false
		if step == stepEnded {
			l.order = slices.Delete(l.order, i, i+1)
			if l.turn > i {
				l.turn--
			}
		} else {
			l.turn++
		}
		if len(l.order) > 0 {
			l.turn %= len(l.order)
		}
		l.cond.Broadcast()
		if step == stepEnded {
			return
		}
	}
	for l.arrived < l.n || l.running || l.order[l.turn] != id {
		if ctx.Err() != nil {
			return
		}
		l.cond.Wait()
	}
	l.running = true
}

// runMixedBurst sends 30 short requests one by one, then a burst of 16
// long prompts of mixed sizes, run in lockstep, to a server admitting with
// or without per-request sizes, and then, with bursts > 1, the same burst
// again on the same server.
func runMixedBurst(t testing.TB, sized bool, bursts int) (*testServer, []burstResult) {
	const n = 16
	edit := burstConfig(true)
	var l *lockstep
	ts := startServer(t, func(c *config) {
		edit(c)
		c.sized = sized
		c.hookStep = func(ctx context.Context, step int) { l.hook(ctx, step) }
	})
	l = newLockstep(n)
	for i := range 30 {
		o := ts.generate("prompt=64&tokens=16")
		require.NoError(t, o.err)
		require.Equal(t, http.StatusOK, o.status, "short request %d: %s", i, o.body)
	}
	var results []burstResult
	for range bursts {
		var p99 int64
		if kinds := ts.lanes[0].pool.Stats().AdmissionKinds; len(kinds) > 0 {
			p99 = kinds[0].P99
		}
		l = newLockstep(n)
		l.on.Store(true)
		start := time.Now()
		out := make([]outcome, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { out[i] = ts.generate(longPrompt(i)) })
			<-l.events
		}
		wg.Wait()
		r := burstResult{wall: time.Since(start), p99: p99}
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
		results = append(results, r)
	}
	return ts, results
}

// After 30 short requests, a burst of 16 long prompts of mixed sizes:
// admitted by their kind's p99 peak (one figure per kind, of the short
// requests) they are all admitted and memory runs out inside some of them;
// sized, none runs out. Throughput, a rate, is a benchmark's
// (BenchmarkSizedAdmissionBurst); the figures are printed.
func TestSizedAdmissionBurstRunsNoneOutOfMemory(t *testing.T) {
	tsFixed, fixedRuns := runMixedBurst(t, false, 1)
	tsSized, sizedRuns := runMixedBurst(t, true, 2)
	fixed, sized, again := fixedRuns[0], sizedRuns[0], sizedRuns[1]
	pf, ps := tsFixed.lanes[0].pool.Stats(), tsSized.lanes[0].pool.Stats()
	require.Len(t, pf.AdmissionKinds, 1)
	require.Len(t, ps.AdmissionKinds, 1)
	kf, ks := pf.AdmissionKinds[0], ps.AdmissionKinds[0]
	// Printed, not logged: the README shows these lines as a run prints them.
	fmt.Printf("after 30 short requests, 16 long prompts (384 to 504 tokens in, 512 out, batch 8), budget %s:\n", report.Bytes(pf.Limit))
	row := func(what string, r burstResult) {
		fmt.Printf("  %-24s %2d admitted, %2d completed, %2d ran out of memory, %2d refused\n", what+":", r.ok+r.oom, r.ok, r.oom, r.refused)
	}
	row("per kind (p99 "+report.Bytes(fixed.p99)+")", fixed)
	row("sized, no history", sized)
	row("sized, the burst again", again)
	fmt.Printf("what the kind learned: %s + %.0f B a unit, up to %d units\n", report.Bytes(int64(ks.Base)), ks.PerUnit, ks.MaxUnits)

	assert.Positive(t, fixed.oom, "the kind's p99 admits long prompts on a short request's reservation")
	assert.EqualValues(t, fixed.oom, kf.RanOut)
	for _, r := range sizedRuns {
		assert.Zero(t, r.oom, "no admitted request ran out of memory")
		assert.Positive(t, r.ok)
		assert.Equal(t, 16, r.ok+r.refused)
	}
	assert.GreaterOrEqual(t, again.ok, sized.ok, "history admits no fewer")
	assert.Zero(t, ps.OOMs, "no allocation ran out of memory")
	assert.Zero(t, ps.Admissions, "every reservation was released")
	assert.Equal(t, `route=POST /generate`, ks.Kind)
	assert.EqualValues(t, 30+sized.ok+again.ok, ks.Admitted)
	assert.EqualValues(t, sized.refused+again.refused, ks.Refused)
	assert.Zero(t, ks.RanOut)
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
		ts, r := runMixedBurst(b, sized, 1)
		if err := ts.shutdown(b); err != nil {
			b.Fatal(err)
		}
		return r[0]
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
