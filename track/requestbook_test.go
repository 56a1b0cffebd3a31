package track_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// The rows of OpenRequests are exact: a request begun by WithLabels whose
// context is done is never shown, even when more are open than a reading
// sweeps, and the sums lose it within about ⌈open/32⌉ readings.
func TestOpenRequestRowsSeeEndsAtOnce(t *testing.T) {
	tr := newTracker(t)
	const open = 1000
	cancels := make([]context.CancelFunc, open)
	recs := make([]*track.Record, open)
	for i := range open {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		recs[i] = recordA(tr, track.WithLabels(ctx, "request", fmt.Sprint(i)), int64(10+i), "tensor")
	}
	defer func() { release(t, tr, recs...) }()
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	got := tr.OpenRequests(3)
	require.Len(t, got.Largest, 3)
	assert.Equal(t, "{request=999}", got.Largest[0].Labels.String())
	assert.Equal(t, "{request=0}", got.Oldest[0].Labels.String())

	// The largest and the oldest end: the next reading shows neither.
	cancels[open-1]()
	cancels[0]()
	got = tr.OpenRequests(3)
	require.Len(t, got.Largest, 3)
	assert.Equal(t, "{request=998}", got.Largest[0].Labels.String())
	assert.Equal(t, "{request=1}", got.Oldest[0].Labels.String())
	for _, r := range append(got.Largest, got.Oldest...) {
		assert.NotContains(t, []string{"{request=0}", "{request=999}"}, r.Labels.String())
	}
	sum := got.OthersBytes
	for _, r := range got.Largest {
		sum += r.InFlightBytes
	}
	assert.Equal(t, got.InFlightBytes, sum, "rows and others add up")

	// Half the others end: the sums lose them within about ⌈open/32⌉
	// readings.
	var want int64 // what the open ones hold
	for i := 1; i < open-1; i++ {
		if i%2 == 0 {
			cancels[i]()
		} else {
			want += int64(10 + i)
		}
	}
	sweepAll(tr, open)
	got = tr.OpenRequests(3)
	assert.Equal(t, (open-2)/2, got.Count)
	assert.Equal(t, want, got.InFlightBytes)
	assert.Equal(t, want-(10+997)-(10+995)-(10+993), got.OthersBytes)
	var outlived int64
	for _, s := range tr.SiteTotals() {
		outlived += s.OutlivedBytes
	}
	assert.Equal(t, int64(10*open+open*(open-1)/2)-want, outlived, "every ended request's tensor outlived it")
}

// sweepAll reads tr's totals often enough for every request of the
// listed to have been looked at: twice ⌈listed/32⌉, a lap of every shard
// of the book (a shard whose requests end faster than the others' laps
// more slowly than its share).
func sweepAll(tr *track.Tracker, listed int) {
	for range 2 * ((listed + 31) / 32) {
		tr.Totals()
	}
}

// Requests end out of listing order, in every shard of the book: each
// reading keeps the open ones, their order and their figures, and the
// requests listed after it join the same lists.
func TestBookKeepsTheOpenRequestsInOrder(t *testing.T) {
	tr := newTracker(t)
	type req struct {
		end   context.CancelFunc
		rec   *track.Record
		bytes int64
	}
	var reqs []req
	var recs []*track.Record
	list := func(n int) {
		for range n {
			i := len(reqs)
			ctx, end := context.WithCancel(context.Background())
			bytes := int64(10 + i)
			r := recordA(tr, track.WithLabels(ctx, "request", fmt.Sprint(i)), bytes, "tensor")
			reqs = append(reqs, req{end: end, rec: r, bytes: bytes})
			recs = append(recs, r)
		}
	}
	defer func() { release(t, tr, recs...) }()
	check := func(step string) {
		t.Helper()
		var count int
		var bytes, largest int64
		var largestName string
		for i, q := range reqs {
			if q.end != nil {
				count++
				bytes += q.bytes
				if q.bytes > largest {
					largest, largestName = q.bytes, fmt.Sprint(i)
				}
			}
		}
		open := tr.OpenRequests(3) // the rows are exact at once
		if count > 0 {
			require.NotEmpty(t, open.Largest, step)
			assert.Equal(t, "{request="+largestName+"}", open.Largest[0].Labels.String(), step)
		}
		sweepAll(tr, len(reqs)) // the sums, once every listed request was looked at
		open = tr.OpenRequests(3)
		assert.Equal(t, count, open.Count, step)
		assert.Equal(t, bytes, open.InFlightBytes, step)
		if count > 0 {
			require.NotEmpty(t, open.Largest, step)
			assert.Equal(t, "{request="+largestName+"}", open.Largest[0].Labels.String(), step)
		}
		sum := open.OthersBytes
		for _, r := range open.Largest {
			sum += r.InFlightBytes
		}
		assert.Equal(t, open.InFlightBytes, sum, step)
	}
	endEvery := func(k, from int) {
		for i := from; i < len(reqs); i += k {
			if reqs[i].end != nil {
				reqs[i].end()
				reqs[i].end = nil
			}
		}
	}
	list(300)
	check("listed")
	endEvery(3, 1)
	check("every third ended")
	list(100)
	endEvery(5, 0)
	check("more listed, every fifth ended")
	reqs[len(reqs)-1].end() // the largest
	reqs[len(reqs)-1].end = nil
	check("the largest ended")
	endEvery(1, 0)
	check("all ended")
}

// Readers read while requests begin, record, release and end on other
// goroutines: every reading adds up, and once all have ended none is open.
func TestReadWhileRequestsComeAndGo(t *testing.T) {
	tr := newTracker(t)
	const workers, perWorker = 6, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				ctx, end := context.WithCancel(context.Background())
				ctx = track.WithLabels(ctx, "worker", fmt.Sprint(w))
				a := recordA(tr, ctx, int64(64*(i%7+1)), "tensor")
				b := recordB(tr, ctx, 32)
				if err := b.Release(); err != nil {
					panic(err)
				}
				end() // a outlives its request
				if err := a.Release(); err != nil {
					panic(err)
				}
			}
		})
	}
	readers := make(chan struct{})
	go func() {
		defer close(readers)
		for range 300 {
			open := tr.OpenRequests(3)
			sum := open.OthersBytes
			for _, r := range open.Largest {
				sum += r.InFlightBytes
			}
			assert.Equal(t, open.InFlightBytes, sum)
			assert.GreaterOrEqual(t, open.Count, len(open.Largest))
			tr.TopSites(3)
		}
	}()
	wg.Wait()
	<-readers
	assert.Equal(t, 0, tr.OpenRequests(3).Count)
}

// A request that records in two trackers is listed in both books, shows
// what it holds in both, and leaves both at its end, whichever way it
// ends.
func TestRequestInTwoTrackers(t *testing.T) {
	for _, begin := range []struct {
		name  string
		begin func() (context.Context, func())
	}{
		{"WithRequest", func() (context.Context, func()) {
			ctx, end := track.WithRequest(context.Background())
			return ctx, end
		}},
		{"BeginRequest", func() (context.Context, func()) {
			return track.BeginRequest(context.Background(), "request", "r")
		}},
		{"WithLabels", func() (context.Context, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			return track.WithLabels(ctx, "request", "r"), cancel
		}},
	} {
		t.Run(begin.name, func(t *testing.T) {
			a, b := newTracker(t), newTracker(t)
			ctx, end := begin.begin()
			ra := recordA(a, ctx, 100, "tensor")
			rb := recordA(b, ctx, 20, "tensor")
			for _, tr := range []*track.Tracker{a, b} {
				open := tr.OpenRequests(1)
				require.Equal(t, 1, open.Count)
				assert.Equal(t, int64(120), open.Largest[0].InFlightBytes, "what it holds in both")
			}
			end()
			for _, tr := range []*track.Tracker{a, b} {
				assert.Zero(t, tr.OpenRequests(1).Count, "gone from both books")
			}
			assert.Equal(t, int64(100), a.Totals().OutlivedBytes)
			assert.Equal(t, int64(20), b.Totals().OutlivedBytes)
			release(t, a, ra)
			release(t, b, rb)
		})
	}
}

// The book's largest follow requests as they grow and shrink after they
// were listed, and its oldest as they end: after every step of a seeded
// random walk over 200 requests the rows are those of a model of them.
func TestBookFollowsRequestsAsTheyChange(t *testing.T) {
	tr := newTracker(t)
	rng := rand.New(rand.NewPCG(46, 1))
	type req struct {
		ctx   context.Context
		end   context.CancelFunc
		recs  []*track.Record
		bytes int64
		order int
	}
	reqs := make([]*req, 200)
	for i := range reqs {
		ctx, end := track.WithRequest(context.Background())
		q := &req{ctx: track.WithLabels(ctx, "request", fmt.Sprint(i)), end: end, order: i}
		q.recs = append(q.recs, recordA(tr, q.ctx, 1, "tensor"))
		q.bytes = 1
		reqs[i] = q
	}
	defer func() {
		for _, q := range reqs {
			release(t, tr, q.recs...)
		}
	}()
	for step := range 300 {
		for range 10 {
			q := reqs[rng.IntN(len(reqs))]
			if q.end == nil {
				continue
			}
			switch rng.IntN(5) {
			case 0, 1, 2:
				n := int64(1 + rng.IntN(1000))
				q.recs = append(q.recs, recordA(tr, q.ctx, n, "tensor"))
				q.bytes += n
			case 3:
				if len(q.recs) > 0 {
					r := q.recs[len(q.recs)-1]
					q.bytes -= r.Bytes
					release(t, tr, r)
					q.recs = q.recs[:len(q.recs)-1]
				}
			case 4:
				if step%3 == 0 {
					q.end()
					q.end = nil
				}
			}
		}
		var open []*req
		for _, q := range reqs {
			if q.end != nil {
				open = append(open, q)
			}
		}
		largest := slices.Clone(open)
		slices.SortStableFunc(largest, func(a, b *req) int { return cmp.Compare(b.bytes, a.bytes) })
		got := tr.OpenRequests(5)
		require.Equal(t, len(open), got.Count, "step %d", step)
		for i, r := range got.Largest {
			assert.Equal(t, largest[i].bytes, r.InFlightBytes, "step %d: row %d of the largest", step, i)
		}
		for i, r := range got.Oldest {
			assert.Equal(t, fmt.Sprintf("{request=%d}", open[i].order), r.Labels.String(), "step %d: row %d of the oldest", step, i)
		}
	}
}
