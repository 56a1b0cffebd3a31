package watch_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// These workloads begin their requests the way the README shows, with
// track.WithLabels on a context that ends, and end them with the context's
// own cancel: the end must count at the next Tick, whatever the scheduler
// does.

//go:noinline
func labelledLeak(t testing.TB, ctx context.Context, tr *track.Tracker) *track.Record {
	return record(t, ctx, tr, 2048)
}

// TestLabelledRequestLeakNamedAtOnce: each request's context is cancelled
// right before the tick, and the leak of one tensor per request is named
// within 8 requests in every run.
func TestLabelledRequestLeakNamedAtOnce(t *testing.T) {
	for run := range 20 {
		tr, w, log := watchedTracker(t, "labelled-"+strconv.Itoa(run))
		var kept []*track.Record
		named := flaggedAt(t, w, log, 64, func(request int) {
			ctx, cancel := context.WithCancel(context.Background())
			ctx = track.WithLabels(ctx, "request", strconv.Itoa(request))
			kept = append(kept, labelledLeak(t, ctx, tr))
			release(t, tr, record(t, ctx, tr, 1<<20))
			cancel()
		})
		require.NotZero(t, named, "run %d: the leak is named", run)
		assert.LessOrEqual(t, named, 8, "run %d", run)
		release(t, tr, kept...)
	}
}

//go:noinline
func workerLeak(t testing.TB, ctx context.Context, tr *track.Tracker) *track.Record {
	return record(t, ctx, tr, 4096)
}

// TestWorkerContextIsOneRequest guards the rule for long-lived contexts: a
// worker that labels each job with WithLabels on its own context, which
// ends only at shutdown, holds one long request, so nothing it keeps is
// judged while it runs (its memory is in flight: no count of jobs and no
// clock ends a request). The same worker scoping each job with
// WithRequest has its leak named.
func TestWorkerContextIsOneRequest(t *testing.T) {
	tr, w, log := watchedTracker(t, "worker")
	worker, stop := context.WithCancel(context.Background())
	defer stop()
	var kept []*track.Record
	named := flaggedAt(t, w, log, 400, func(job int) {
		ctx := track.WithLabels(worker, "job", strconv.Itoa(job))
		kept = append(kept, workerLeak(t, ctx, tr))
		release(t, tr, record(t, ctx, tr, 64<<10)) // the job's scratch
	})
	assert.Zero(t, named, "nothing is judged while the worker's request runs")
	assert.Zero(t, w.SuspectCount())
	release(t, tr, kept...)

	tr, w, log = watchedTracker(t, "scoped-worker")
	kept = kept[:0]
	named = flaggedAt(t, w, log, 400, func(job int) {
		ctx, end := track.WithRequest(worker)
		defer end()
		ctx = track.WithLabels(ctx, "job", strconv.Itoa(job))
		kept = append(kept, workerLeak(t, ctx, tr))
		release(t, tr, record(t, ctx, tr, 64<<10))
	})
	require.NotZero(t, named, "the scoped worker's leak is named")
	t.Logf("named after %d jobs", named)
	assert.Equal(t, map[string]int{"github.com/tensorlife/tensorlife/track/watch_test.workerLeak": 1}, sitesNamed(log))
	release(t, tr, kept...)
}

// TestLeakFreeWorkerPoolIsNeverJudged: 128 workers on one labelled
// context, 40 jobs each, every job freeing what it made after a few
// others ran, with a window ending after every job: no suspect.
func TestLeakFreeWorkerPoolIsNeverJudged(t *testing.T) {
	tr, w, log := watchedTracker(t, "pool")
	base, stop := context.WithCancel(context.Background())
	defer stop()
	const workers, jobs = 128, 40
	var inFlight []*track.Record
	for job := range workers * jobs {
		ctx := track.WithLabels(base, "worker", strconv.Itoa(job%workers), "job", strconv.Itoa(job))
		inFlight = append(inFlight, workerLeak(t, ctx, tr))
		if len(inFlight) > workers { // the oldest job finishes
			release(t, tr, inFlight[0])
			inFlight = inFlight[1:]
		}
		require.NoError(t, w.Tick())
	}
	assert.Empty(t, log.all(), "a leak-free pool has no suspect")
	release(t, tr, inFlight...)
}

// TestLongRequestKVIsNotJudged: one request under one WithLabels lengthens
// its KV cache over 100 windows, then ends and frees it: no suspect.
func TestLongRequestKVIsNotJudged(t *testing.T) {
	tr, w, log := watchedTracker(t, "kv")
	parent, cancel := context.WithCancel(context.Background())
	ctx := track.WithLabels(parent, "request", "long")
	var kv []*track.Record
	for range 100 {
		kv = append(kv, record(t, ctx, tr, 8192))
		require.NoError(t, w.Tick())
	}
	release(t, tr, kv...)
	cancel()
	for range 16 {
		require.NoError(t, w.Tick())
	}
	assert.Empty(t, log.all(), "memory in flight is never judged")
}
