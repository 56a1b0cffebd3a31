package pprofexport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// startDelta serves a delta request under ctx in a goroutine and returns
// its recorder and a channel closed when the handler returns.
func startDelta(ctx context.Context, h http.Handler, query string) (*httptest.ResponseRecorder, <-chan struct{}) {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/debug/pprof/tensors?"+query, nil)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, req)
	}()
	return rec, done
}

// waitFor polls cond until it holds; the test's deadline bounds it.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		if dl, ok := t.Deadline(); ok && time.Until(dl) < time.Second {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}

// Delta requests beyond MaxConcurrentDeltas are answered 429 at once, and a
// delta whose request ends gives its place back.
func TestHandlerLimitsConcurrentDeltas(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	hh, err := NewHandler(tr, MaxConcurrentDeltas(2))
	require.NoError(t, err)
	h := hh.(*handler)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, firstDone := startDelta(ctx, h, "seconds=300")
	second, secondDone := startDelta(ctx, h, "seconds=300")
	waitFor(t, func() bool { return len(h.deltas) == 2 })

	third, thirdDone := startDelta(context.Background(), h, "seconds=300")
	<-thirdDone
	assert.Equal(t, http.StatusTooManyRequests, third.Code)
	assert.Contains(t, third.Body.String(), "at most 2 at once (MaxConcurrentDeltas)", "the text states the limit")
	assert.Equal(t, "300", third.Header().Get("Retry-After"))

	// A live profile is not a delta: it is served while deltas wait.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/tensors", nil))
	assert.Equal(t, http.StatusOK, rec.Code)

	// Cancelling the requests (the clients left, or the server shut down)
	// ends both waits at once and frees their places.
	cancel()
	<-firstDone
	<-secondDone
	assert.Equal(t, http.StatusServiceUnavailable, first.Code)
	assert.Equal(t, http.StatusServiceUnavailable, second.Code)
	assert.Contains(t, first.Body.String(), "delta window interrupted: context canceled")
	assert.Zero(t, len(h.deltas), "nothing is held once the requests ended")

	ctx2, cancel2 := context.WithCancel(context.Background())
	again, againDone := startDelta(ctx2, h, "seconds=300")
	waitFor(t, func() bool { return len(h.deltas) == 1 })
	cancel2()
	<-againDone
	assert.Equal(t, http.StatusServiceUnavailable, again.Code, "a new delta was admitted, then interrupted")
}

// The real clock waits the whole window, and ends it early when the
// request ends. The tests that serve deltas run their windows at once
// (WindowClock); this is the clock they stand in for.
func TestSleepWaitsTheWindow(t *testing.T) {
	const d = 20 * time.Millisecond
	start := time.Now()
	require.NoError(t, sleep(context.Background(), d))
	assert.GreaterOrEqual(t, time.Since(start), d)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, sleep(ctx, time.Hour), context.Canceled, "a request that ended ends the window")
}
