package track_test

import (
	"context"
	"fmt"
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
