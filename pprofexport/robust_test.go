package pprofexport_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

// TestHandlerRefusesAConfigurationThatAnswersNothing guards against a
// handler that would answer 400 to everything: both kinds of profile
// turned off is refused by the constructor; either one alone is served.
func TestHandlerRefusesAConfigurationThatAnswersNothing(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	h, err := pprofexport.NewHandler(tr, pprofexport.MaxConcurrentProfiles(0), pprofexport.MaxConcurrentDeltas(0))
	require.ErrorIs(t, err, pprofexport.ErrInvalidOption)
	assert.Contains(t, err.Error(), "could answer nothing")
	assert.Nil(t, h)
	for _, opt := range []pprofexport.HandlerOption{pprofexport.MaxConcurrentProfiles(0), pprofexport.MaxConcurrentDeltas(0)} {
		h, err := pprofexport.NewHandler(tr, opt)
		require.NoError(t, err, "one kind of profile is still served")
		assert.NotNil(t, h)
	}
}

// TestBadRequestBodiesQuoteABoundedPrefix guards the error answers against
// hostile values: a 100 KB value is quoted by its first bytes and its
// length, never echoed whole, in every parameter's refusal.
func TestBadRequestBodiesQuoteABoundedPrefix(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	h := newHandler(t, tr)
	hostile := strings.Repeat("A", 100_000)
	for _, query := range []string{
		"debug=" + hostile, "seconds=" + hostile, "min_age=" + hostile, "outlived=" + hostile,
		"leaked=" + hostile, "gc=" + hostile, "kind=" + hostile + "&kind=b", "kind=a&kind=" + hostile,
		"kind=%zz" + hostile, "kind=" + strings.Repeat("ü", 50_000) + "&kind=b",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tensorsPath+"?"+query, nil))
		name := query[:20]
		assert.Equal(t, http.StatusBadRequest, rec.Code, name)
		assert.Less(t, rec.Body.Len(), 512, "%s: the answer does not grow with the value", name)
		assert.NotContains(t, rec.Body.String(), strings.Repeat("A", 200), name)
		if !strings.Contains(query, "%zz") {
			assert.Regexp(t, `\.\.\. \(\d+ bytes\)`, rec.Body.String(), "%s: says how long the value was", name)
		}
	}
	// A short value is still quoted whole.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tensorsPath+"?debug=x", nil))
	assert.Contains(t, rec.Body.String(), `invalid value for "debug": "x",`)

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(strings.Repeat("M", 10_000), tensorsPath, nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Less(t, rec.Body.Len(), 512, "a long method is cut too")
}

// TestForcedCollectionsAreRateLimited guards the service against ?gc=1 on
// every request: at most one collection is forced per GCInterval of the
// handler's clock, the requests in between are served without forcing
// one, and the next interval forces one again.
func TestForcedCollectionsAreRateLimited(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	var mu sync.Mutex
	now := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	step := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	h := newHandler(t, tr, pprofexport.Clock(clock), instant, pprofexport.MaxConcurrentProfiles(8))

	forced := func(queries ...string) uint32 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, q := range queries {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tensorsPath+"?"+q, nil))
			require.Equal(t, http.StatusOK, rec.Code, "%s: %s", q, rec.Body.String())
		}
		runtime.ReadMemStats(&after)
		return after.NumForcedGC - before.NumForcedGC
	}
	assert.Equal(t, uint32(1), forced("gc=1", "gc=1", "gc=1&debug=1", "gc=1&seconds=1"), "one per interval")
	step(pprofexport.GCInterval - time.Nanosecond)
	assert.Equal(t, uint32(0), forced("gc=1"), "still within the interval")
	step(time.Nanosecond)
	assert.Equal(t, uint32(1), forced("gc=1", "gc=1"), "the next interval forces one again")
	step(time.Hour)
	assert.Equal(t, uint32(0), forced("", "debug=1", "gc=0"), "none without gc=1")

	// Concurrent requests racing for one interval force one collection.
	step(time.Hour)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tensorsPath+"?gc=1&debug=1", nil))
			assert.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, rec.Code)
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	assert.Equal(t, uint32(1), after.NumForcedGC-before.NumForcedGC)
}
