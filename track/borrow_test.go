package track_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// shared is a record many requests take handles on, as a cache's mask.
func shared(t *testing.T, tr *track.Tracker) *track.Record {
	r := &track.Record{Bytes: 4096, Meta: track.InternMeta("mask", "host", "", nil)}
	require.NoError(t, tr.Books().Record(context.Background(), r, 0))
	return r
}

// takeHandle is the line that takes a handle.
//
//go:noinline
func takeHandle(tr *track.Tracker, ctx context.Context, r *track.Record) (*track.Site, *track.Borrow) {
	site := tr.Books().CallerSite(0)
	return site, r.HoldUnder(ctx, site, "Retain")
}

// A handle still held when its request ends has outlived it, counted at
// the line that took it: at the end function's call, or, for a request
// that ends with its context, at the next read; one returned first, or
// taken under no request, is not.
func TestBorrowOutlivesItsRequest(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	r := shared(t, tr)
	stats := func(s *track.Site) track.SiteStats { return s.Stats() }

	ctx, end := track.WithRequest(context.Background())
	site, b := takeHandle(tr, ctx, r)
	require.NotNil(t, b)
	assert.Zero(t, stats(site).OutlivedHandles, "in flight while its request is open")
	end()
	assert.Equal(t, int64(1), stats(site).OutlivedHandles, "outlived at its request's end")
	assert.Equal(t, int64(4096), stats(site).OutlivedHandleBytes)
	b.Return()
	b.Return() // a second Return does nothing
	assert.Zero(t, stats(site).OutlivedHandles, "returned: no longer counted")

	// A request that records nothing and ends with its context alone.
	cctx, cancel := context.WithCancel(context.Background())
	lctx := track.WithLabels(cctx, "route", "/generate")
	site, b = takeHandle(tr, lctx, r)
	assert.Equal(t, 1, tr.OpenRequests(1).Count, "listed by its borrow")
	cancel()
	tr.Totals() // a reading of the gauges: with few open, it sees every end
	assert.Equal(t, int64(1), stats(site).OutlivedHandles, "its context's end is seen by the next read")
	b.Return()

	ctx, end = track.WithRequest(context.Background())
	site, b = takeHandle(tr, ctx, r)
	b.Return() // freed before the end
	end()
	assert.Zero(t, stats(site).OutlivedHandles)

	site, b = takeHandle(tr, context.Background(), r)
	assert.Nil(t, b, "under no request nothing is judged")
	assert.Zero(t, stats(site).OutlivedHandles)
	require.NoError(t, r.Release())
}

// Requests on 8 goroutines take handles and end while others return
// theirs: the handles still held at their requests' ends are counted, once.
func TestBorrowsUnderConcurrentEnds(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	r := shared(t, tr)
	var mu sync.Mutex
	var kept []*track.Borrow
	var site *track.Site
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				ctx, end := track.WithRequest(context.Background())
				s, b := takeHandle(tr, ctx, r)
				if (g+i)%5 == 0 {
					end()
					mu.Lock()
					kept, site = append(kept, b), s
					mu.Unlock()
					continue
				}
				done := make(chan struct{})
				go func() { b.Return(); close(done) }() // returned while the request ends
				end()
				<-done
			}
		})
	}
	wg.Wait()
	require.NotNil(t, site)
	assert.Equal(t, int64(len(kept)), site.Stats().OutlivedHandles)
	for _, b := range kept {
		b.Return()
	}
	assert.Zero(t, site.Stats().OutlivedHandles)
	require.NoError(t, r.Release())
}
