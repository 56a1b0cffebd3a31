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

// A Settled reads the tracker as its settle left it: a context that ends
// after it is settled by the next Settle, not by the readers of the first.
func TestSettledReadsOneMoment(t *testing.T) {
	tr := newTracker(t)
	early, endEarly := context.WithCancel(context.Background())
	late, endLate := context.WithCancel(context.Background())
	defer endLate()
	rEarly := recordA(tr, track.WithLabels(early, "request", "early"), 100, "tensor")
	rLate := recordA(tr, track.WithLabels(late, "request", "late"), 300, "tensor")
	defer release(t, tr, rEarly, rLate)

	endEarly() // done before the settle: every reader of it sees the end
	read := tr.Settle()
	endLate() // done after it: its readers still count the request open

	open := read.OpenRequests(5)
	assert.Equal(t, 1, open.Count)
	assert.Equal(t, int64(300), open.InFlightBytes)
	require.Len(t, open.Largest, 1)
	assert.Equal(t, "{request=late}", open.Largest[0].Labels.String())
	outlived := func(sites []track.SiteStats) (sum int64) {
		for _, s := range sites {
			sum += s.OutlivedBytes
		}
		return sum
	}
	sites := read.TopSites(5)
	require.Len(t, sites, 2) // one a request
	assert.Equal(t, int64(100), outlived(sites), "the early request's tensor alone")
	assert.Len(t, read.HeldBy([]*track.Site{sites[0].Site}, 4), 1)

	again := tr.Settle()
	assert.Equal(t, 0, again.OpenRequests(5).Count)
	assert.Equal(t, int64(400), outlived(again.TopSites(5)))
	assert.Equal(t, 0, tr.OpenRequests(5).Count)
}

func TestZeroSettledReadsNothing(t *testing.T) {
	var read track.Settled
	assert.Equal(t, track.OpenRequests{}, read.OpenRequests(5))
	assert.Empty(t, read.TopSites(5))
	assert.Equal(t, [][]track.Holder{}, read.HeldBy(nil, 4))
}

// Requests end out of listing order, in every shard of the book: each
// settle keeps the open ones, their order and their figures, and the
// requests listed after it join the same lists.
func TestSettleKeepsTheOpenRequestsInOrder(t *testing.T) {
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
		open := tr.OpenRequests(3)
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

// Readers settle while requests begin, record, release and end on other
// goroutines: every reading adds up, and once all have ended none is open.
func TestSettleWhileRequestsComeAndGo(t *testing.T) {
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
			read := tr.Settle()
			open := read.OpenRequests(3)
			sum := open.OthersBytes
			for _, r := range open.Largest {
				sum += r.InFlightBytes
			}
			assert.Equal(t, open.InFlightBytes, sum)
			assert.GreaterOrEqual(t, open.Count, len(open.Largest))
			read.TopSites(3)
		}
	}()
	wg.Wait()
	<-readers
	assert.Equal(t, 0, tr.OpenRequests(3).Count)
}
