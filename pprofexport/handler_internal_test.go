package pprofexport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
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
		runtime.Gosched() // the handler's goroutine gets there on its own

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

// Every profile request, not only deltas, is bounded: beyond
// MaxConcurrentProfiles a profile or a text table is answered 429 at once,
// with Retry-After and a text that states the limit; deltas keep their own
// limit; a place comes back when its request ends.
func TestHandlerLimitsConcurrentProfiles(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	hh, err := NewHandler(tr, MaxConcurrentProfiles(2))
	require.NoError(t, err)
	h := hh.(*handler)
	get := func(query string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/tensors"+query, nil))
		return rec
	}
	require.Equal(t, http.StatusOK, get("").Code)
	assert.Empty(t, h.profiles, "a served profile gives its place back")

	h.profiles <- struct{}{} // two profiles in progress
	h.profiles <- struct{}{}
	for _, query := range []string{"", "?debug=1", "?gc=1", "?kind=mask&min_age=1s"} {
		rec := get(query)
		assert.Equal(t, http.StatusTooManyRequests, rec.Code, query)
		assert.Equal(t, "1", rec.Header().Get("Retry-After"), query)
		assert.Equal(t, "pprofexport: too many profiles in progress: this endpoint computes at most 2 at once (MaxConcurrentProfiles); retry later\n",
			rec.Body.String(), query)
		assert.Equal(t, "1", rec.Header().Get("X-Go-Pprof"), "go tool pprof prints the text")
	}
	assert.Equal(t, http.StatusBadRequest, get("?debug=7").Code, "a bad request is refused as such, whatever the load")

	// A delta is not held up by the profiles in progress.
	ctx, cancel := context.WithCancel(context.Background())
	delta, deltaDone := startDelta(ctx, h, "seconds=300")
	waitFor(t, func() bool { return len(h.deltas) == 1 })
	cancel()
	<-deltaDone
	assert.Equal(t, http.StatusServiceUnavailable, delta.Code, "the delta was admitted, then interrupted")

	<-h.profiles // one ends
	assert.Equal(t, http.StatusOK, get("?debug=1").Code)
	assert.Equal(t, http.StatusOK, get("").Code, "the place came back")
	<-h.profiles
	assert.Empty(t, h.profiles)
}

// Concurrent requests against a limit of one: each is served or refused
// with 429, none waits for another, and every place comes back.
func TestHandlerProfileLimitUnderLoad(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	hh, err := NewHandler(tr, MaxConcurrentProfiles(1))
	require.NoError(t, err)
	h := hh.(*handler)
	codes := make(chan int, 64)
	var wg sync.WaitGroup
	for range cap(codes) {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/tensors?debug=1", nil))
			codes <- rec.Code
		})
	}
	wg.Wait()
	close(codes)
	served := 0
	for code := range codes {
		require.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, code)
		if code == http.StatusOK {
			served++
		}
	}
	assert.Positive(t, served)
	assert.Empty(t, h.profiles, "every place came back")
}
