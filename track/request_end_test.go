package track_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// TestEndedRequestsCountAtTheNextRead guards that a request's end is a fact
// for the readers the moment its context is done, with no goroutine given
// a chance to run in between: 200 requests begun by WithRequest, each
// ended, are all outlived at the very next read of each kind; so are 32
// begun by WithLabels (as many as a reading looks at), each cancelled; of
// 200 begun by WithLabels, the exact readings see each end at once, and
// the gauges within a lap of the book's sweep.
func TestEndedRequestsCountAtTheNextRead(t *testing.T) {
	readers := map[string]struct {
		read  func(t *testing.T, tr *track.Tracker) int64
		exact bool // never lags: it looks at what it shows
	}{
		"Totals": {read: func(t *testing.T, tr *track.Tracker) int64 { return tr.Totals().OutlivedBytes }},
		"SiteTotals": {read: func(t *testing.T, tr *track.Tracker) int64 {
			var n int64
			for _, s := range tr.SiteTotals() {
				n += s.OutlivedBytes
			}
			return n
		}},
		"SnapshotOf(Outlived)": {exact: true, read: func(t *testing.T, tr *track.Tracker) int64 {
			s, err := tr.SnapshotOf(track.Filter{Outlived: true})
			require.NoError(t, err)
			var n int64
			for _, g := range s.Groups {
				n += g.Bytes
			}
			return n
		}},
		"SiteFeed": {read: func(t *testing.T, tr *track.Tracker) int64 {
			var n int64
			for _, s := range tr.Books().NewSiteFeed().Changed(nil) {
				n += s.OutlivedBytes
			}
			return n
		}},
	}
	begins := []struct {
		name     string
		requests int
		begin    func() (context.Context, context.CancelFunc)
		atOnce   bool // every reader sees each end at the next read
	}{
		{"WithRequest", 200, func() (context.Context, context.CancelFunc) {
			return track.WithRequest(context.Background())
		}, true},
		{"WithLabels-32", 32, labelled, true},
		{"WithLabels-200", 200, labelled, false},
	}
	for _, begin := range begins {
		for name, reader := range readers {
			t.Run(begin.name+"/"+name, func(t *testing.T) {
				tr := newTracker(t)
				var recs []*track.Record
				var ends []context.CancelFunc
				for i := range begin.requests {
					ctx, end := begin.begin()
					ctx = track.WithLabels(ctx, "request", strconv.Itoa(i))
					recs = append(recs, recordA(tr, ctx, 8, "tensor"))
					ends = append(ends, end)
				}
				assert.Zero(t, reader.read(t, tr), "in flight")
				for i, end := range ends {
					end()
					want := int64(8 * (i + 1))
					if begin.atOnce || reader.exact {
						assert.Equal(t, want, reader.read(t, tr), "after %d ends", i+1)
					}
				}
				sweepAll(tr, begin.requests)
				assert.Equal(t, int64(8*begin.requests), reader.read(t, tr), "after a lap of the sweep")
				release(t, tr, recs...)
				assert.Zero(t, reader.read(t, tr))
			})
		}
	}
}

// labelled returns a cancellable context, which WithLabels begins a
// request on.
func labelled() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

// TestDeadlineEndsRequest: a request whose deadline passes is over at the
// next read, as a cancelled one is.
func TestDeadlineEndsRequest(t *testing.T) {
	tr := newTracker(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	ctx = track.WithLabels(ctx, "request", "late")
	r := recordA(tr, ctx, 16, "tensor")
	assert.Equal(t, int64(16), outlived(t, tr), "made under a request already over: outlived at once")
	release(t, tr, r)
}

// TestWorkerJobsAreTheWorkersRequest guards the rule for long-lived
// contexts: a request ends only when its context does. Every WithLabels on
// a worker's context is the worker's one request, so nothing a job leaves
// is judged while the worker runs, and all of it is once the worker's
// context ends; a worker that scopes each job with WithRequest has each
// job's leak judged at the job's end.
func TestWorkerJobsAreTheWorkersRequest(t *testing.T) {
	tr := newTracker(t)
	worker, stop := context.WithCancel(context.Background())
	defer stop()
	var leaked []*track.Record
	for job := range 400 {
		ctx := track.WithLabels(worker, "job", strconv.Itoa(job))
		scratch := recordA(tr, ctx, 100, "activations")
		leaked = append(leaked, recordA(tr, ctx, 4096, "tensor"))
		release(t, tr, scratch)
		require.Zero(t, outlived(t, tr), "after job %d: the worker's request runs", job)
	}
	stop()
	assert.Equal(t, int64(400*4096), outlived(t, tr), "the worker's end ends its request")
	release(t, tr, leaked...)

	worker, stop = context.WithCancel(context.Background())
	defer stop()
	leaked = leaked[:0]
	for job := range 100 {
		ctx, end := track.WithRequest(worker)
		ctx = track.WithLabels(ctx, "job", strconv.Itoa(job))
		leaked = append(leaked, recordA(tr, ctx, 4096, "tensor"))
		end()
		require.Equal(t, int64(job+1)*4096, outlived(t, tr), "a scoped job's leak is judged at its end")
	}
	release(t, tr, leaked...)
}

// TestConcurrentJobsOnOneContextAreNeverJudged: 128 jobs running at once on
// one labelled worker context, and one request that labels each of its 80
// layers from the request's own context: nothing is judged while they
// run, and the request book keeps one entry for each context.
func TestConcurrentJobsOnOneContextAreNeverJudged(t *testing.T) {
	tr := newTracker(t)
	worker, stop := context.WithCancel(context.Background())
	defer stop()
	var running []*track.Record
	for job := range 128 {
		ctx := track.WithLabels(worker, "job", strconv.Itoa(job))
		running = append(running, recordA(tr, ctx, 1024, "kv-cache"))
	}
	require.Zero(t, outlived(t, tr), "128 jobs in flight")

	req, cancel := context.WithCancel(context.Background())
	for layer := range 80 {
		ctx := track.WithLabels(req, "layer", strconv.Itoa(layer))
		running = append(running, recordA(tr, ctx, 512, "kv-cache"))
	}
	require.Zero(t, outlived(t, tr), "80 labelled layers of one live request")
	cancel()
	assert.Equal(t, int64(80*512), outlived(t, tr), "the request's end ends every layer")
	release(t, tr, running...)
}

// TestLongRequestIsNeverCutShort: one request under one WithLabels keeps
// what it holds in flight however long it runs and however much it makes.
func TestLongRequestIsNeverCutShort(t *testing.T) {
	tr := newTracker(t)
	parent, cancel := context.WithCancel(context.Background())
	ctx := track.WithLabels(parent, "request", "long")
	var kv []*track.Record
	for range 1000 {
		kv = append(kv, recordA(tr, ctx, 1024, "kv-cache"))
		require.Zero(t, outlived(t, tr))
	}
	cancel()
	release(t, tr, kv...)
	assert.Zero(t, outlived(t, tr))
}

// TestWithLabelsOnLongLivedContextIsBounded guards that WithLabels keeps
// nothing per call on a context that does not end: 200k labelled jobs,
// each allocating and freeing, leave the heap where it was.
func TestWithLabelsOnLongLivedContextIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("200k jobs")
	}
	tr := newTracker(t)
	worker, stop := context.WithCancel(context.Background())
	defer stop()
	job := func(i int) {
		ctx := track.WithLabels(worker, "job", strconv.Itoa(i))
		release(t, tr, recordA(tr, ctx, 64, "tensor"))
	}
	for i := range 1000 { // warm: tables, shards, books
		job(i)
	}
	base := heapInUse()
	for i := range 200_000 {
		job(i)
	}
	sweepAll(tr, 1) // a reading finds the ended requests
	grown := heapInUse() - base
	assert.Less(t, grown, int64(1<<20), "heap grew %d B over 200k WithLabels calls", grown)
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A goroutine a request started may still allocate after the request's
// context is done and before any reader has looked: what it makes then is
// outlived at the very next read, as what the request made before, whether
// the request was listed before its end or by that record alone.
func TestRecordAfterTheContextIsDoneIsOutlivedAtTheNextRead(t *testing.T) {
	for _, before := range []bool{true, false} {
		tr := newTracker(t)
		parent, cancel := context.WithCancel(context.Background())
		ctx := track.WithLabels(parent, "request", "r1")
		var recs []*track.Record
		if before {
			recs = append(recs, recordA(tr, ctx, 64, "tensor"))
		}
		cancel()
		recs = append(recs, recordA(tr, ctx, 32, "tensor"))
		want := int64(32)
		if before {
			want += 64
		}
		assert.Equal(t, want, outlived(t, tr), "listed before the end: %v", before)
		release(t, tr, recs...)
		assert.Zero(t, tr.Totals().OutlivedBytes)
	}
}

// TestEndedLabelledRequestsLeaveTheBook guards that requests begun by
// WithLabels and ended by their contexts' cancels, with nobody reading,
// leave the book as others are listed: 20k of them leave a few listed.
func TestEndedLabelledRequestsLeaveTheBook(t *testing.T) {
	tr := newTracker(t)
	for i := range 20_000 {
		ctx, cancel := context.WithCancel(context.Background())
		release(t, tr, recordA(tr, track.WithLabels(ctx, "request", strconv.Itoa(i)), 64, "tensor"))
		cancel()
	}
	assert.Less(t, tr.OpenRequests(0).Count, 200, "the listings' sweeps found the ends")
}
