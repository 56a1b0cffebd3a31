package track_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// The workloads below drive a watcher with default options, one window per
// request, the way a service ticks it. Each allocating line is its own site.

// record allocates bytes at the caller's line.
//
//go:noinline
func record(t testing.TB, tr *track.Tracker, bytes int64) *track.Record {
	r := &track.Record{Bytes: bytes, Meta: track.InternMeta("tensor", "cuda:0", "float16", []int{int(bytes / 2)})}
	require.NoError(t, tr.Record(context.Background(), r, 1))
	return r
}

// agedWatcher returns a tracker and a watcher with default options whose
// suspects are collected, plus any extra options.
func agedWatcher(t *testing.T, opts ...track.Option) (*track.Tracker, *track.Watcher, *suspectLog) {
	t.Helper()
	return watchedTracker(t, "aged", opts...)
}

// sitesNamed counts the reported suspects by function.
func sitesNamed(log *suspectLog) map[string]int {
	out := map[string]int{}
	for _, s := range log.all() {
		out[s.Site.Location().Function]++
	}
	return out
}

//go:noinline
func seedMask(t testing.TB, tr *track.Tracker, tokens int) *track.Record {
	return record(t, tr, int64(tokens*tokens))
}

func TestSurvivorsSeedLeakNamedWithin8Requests(t *testing.T) {
	tr, w, log := agedWatcher(t)
	var kept []*track.Record
	named := 0
	for request := 1; request <= 40 && named == 0; request++ {
		for step := 1; step <= 16; step++ {
			kept = append(kept, seedMask(t, tr, 64+step)) // the seed's bug: every mask kept
			act := record(t, tr, 1<<20)                   // in flight, freed at once
			require.NoError(t, tr.Release(act))
		}
		require.NoError(t, w.Tick())
		if len(log.all()) > 0 {
			named = request
		}
	}
	require.NotZero(t, named, "the leak is named")
	t.Logf("the seed's leak is named after %d requests", named)
	assert.LessOrEqual(t, named, 8)
	s := log.all()[0]
	assert.Contains(t, s.Site.Location().Function, "seedMask")
	assert.Positive(t, s.SurvivorBytes)
	assert.Greater(t, s.LiveBytes, s.SurvivorBytes, "the latest request's masks are live, not yet survivors")
	release(t, tr, kept...)
}

// fixedAgent serves the fixed agent's requests: transients freed within
// each, activations live at the window's end freed in the next request, and
// a bounded prompt cache, filled by the first requests, that replaces an
// entry now and then.
type fixedAgent struct {
	tr      *track.Tracker
	rng     *rand.Rand
	pending []*track.Record
	cache   []*track.Record
}

//go:noinline
func (a *fixedAgent) serve(t testing.TB) {
	release(t, a.tr, a.pending...)
	a.pending = a.pending[:0]
	for range 8 + a.rng.IntN(8) {
		r := record(t, a.tr, 64<<10+int64(a.rng.IntN(64<<10)))
		require.NoError(t, a.tr.Release(r))
	}
	for range 1 + a.rng.IntN(6) {
		a.pending = append(a.pending, record(t, a.tr, int64(256<<10+a.rng.IntN(256<<10))))
	}
	if len(a.cache) < 4 {
		a.cache = append(a.cache, a.cacheEntry(t))
	} else if a.rng.IntN(4) == 0 {
		i := a.rng.IntN(len(a.cache))
		require.NoError(t, a.tr.Release(a.cache[i]))
		a.cache[i] = a.cacheEntry(t)
	}
}

//go:noinline
func (a *fixedAgent) cacheEntry(t testing.TB) *track.Record { return record(t, a.tr, 8<<10) }

func TestSurvivorsFixedWorkloadHasNoSuspect(t *testing.T) {
	tr, w, log := agedWatcher(t)
	a := &fixedAgent{tr: tr, rng: rand.New(rand.NewPCG(1, 2))}
	requests := 10_000
	if testing.Short() {
		requests = 2_000
	}
	for range requests {
		a.serve(t)
		require.NoError(t, w.Tick())
	}
	assert.Empty(t, log.all(), "a fixed workload has no suspect over %d requests", requests)
	assert.Empty(t, w.Suspects())
}

// sparseLeak keeps 256 bytes; activation is a transient live when the
// window closes.
//
//go:noinline
func sparseLeak(t testing.TB, tr *track.Tracker) *track.Record { return record(t, tr, 256) }

//go:noinline
func activation(t testing.TB, tr *track.Tracker) *track.Record { return record(t, tr, 64<<10) }

// sharedAlloc allocates both the activations and the kept tensor when the
// leak shares its line with the transients, as through one helper.
//
//go:noinline
func sharedAlloc(t testing.TB, tr *track.Tracker, bytes int64) *track.Record {
	return record(t, tr, bytes)
}

// runSparseLeak serves requests and returns the first request after which
// the leaking site was named (0 if never). With shared, the kept tensor and
// the activations come from one line.
func runSparseLeak(t *testing.T, requests int, shared bool, opts ...track.Option) (int, *suspectLog) {
	leakFunc := testPkg + "sparseLeak"
	if shared {
		leakFunc = testPkg + "sharedAlloc"
	}
	tr, w, log := agedWatcher(t, opts...)
	rng := rand.New(rand.NewPCG(3, 4))
	var kept, acts []*track.Record
	named := 0
	for request := 1; request <= requests; request++ {
		release(t, tr, acts...) // the previous request's activations
		acts = acts[:0]
		// One request's allocations: activations, and every 10th request
		// one small tensor that is kept.
		sizes := make([]int64, 40+rng.IntN(21))
		for i := range sizes {
			sizes[i] = 64 << 10
		}
		if request%10 == 0 {
			sizes = append(sizes, 256)
		}
		for _, size := range sizes {
			var r *track.Record
			switch {
			case shared:
				r = sharedAlloc(t, tr, size) // one line, one site
			case size == 256:
				r = sparseLeak(t, tr)
			default:
				r = activation(t, tr)
			}
			if size == 256 {
				kept = append(kept, r)
			} else {
				acts = append(acts, r)
			}
		}
		require.NoError(t, w.Tick())
		for _, s := range log.all() {
			if named == 0 && s.Site.Location().Function == leakFunc {
				named = request
			}
		}
	}
	return named, log
}

func TestSurvivorsSparseSlowLeakNamedWithin100Requests(t *testing.T) {
	named, log := runSparseLeak(t, 100, false)
	require.NotZero(t, named, "the sparse leak is named within 100 requests")
	t.Logf("the sparse slow leak is named after %d requests", named)
	assert.Equal(t, map[string]int{testPkg + "sparseLeak": 1}, sitesNamed(log), "no other site is flagged")

	// Through one line with the transients, ages remove them from the signal.
	named, log = runSparseLeak(t, 100, true)
	require.NotZero(t, named, "the sparse leak sharing its line with transients is named within 100 requests")
	t.Logf("sharing its line with the transients, it is named after %d requests", named)
	assert.Len(t, sitesNamed(log), 1, "no other site is flagged")
	// Judged on all live bytes, the transients hide it.
	named, _ = runSparseLeak(t, 300, true, track.SurvivorAge(0))
	assert.Zero(t, named, "without ages the sparse leak is not named")
}

//go:noinline
func kvBlock(t testing.TB, tr *track.Tracker, bytes int64) *track.Record { return record(t, tr, bytes) }

// runGrowingKV serves requests whose KV cache grows with the sequence
// length, request after request; each request's KV is freed during the
// next one, so at most two requests' KV is live.
func runGrowingKV(t *testing.T, requests int, opts ...track.Option) *suspectLog {
	tr, w, log := agedWatcher(t, opts...)
	var prev, cur []*track.Record
	for request := 1; request <= requests; request++ {
		seq := 128 + 16*request
		cur = nil
		for range 4 { // decode steps, each appending a block per layer pair
			for range 8 {
				cur = append(cur, kvBlock(t, tr, int64(seq)*256))
			}
		}
		release(t, tr, prev...)
		prev = cur
		require.NoError(t, w.Tick())
	}
	release(t, tr, prev...)
	return log
}

func TestSurvivorsInFlightKVIsNoSuspect(t *testing.T) {
	assert.Empty(t, runGrowingKV(t, 250).all(), "in-flight KV growing with sequence length is not a leak")
	assert.NotEmpty(t, runGrowingKV(t, 250, track.SurvivorAge(0)).all(),
		"judged on all live bytes, the growing KV is flagged")
}

//go:noinline
func lruEntry(t testing.TB, tr *track.Tracker, bytes int64) *track.Record {
	return record(t, tr, bytes)
}

func TestSurvivorsBoundedLRUStopsBeingASuspectWhenFull(t *testing.T) {
	tr, w, log := agedWatcher(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const capacity = 48
	var lru []*track.Record // oldest first
	full := 0
	for request := 1; request <= 400; request++ {
		if rng.IntN(3) > 0 { // a miss: insert, evicting the oldest when full
			if len(lru) == capacity {
				require.NoError(t, tr.Release(lru[0]))
				lru = lru[1:]
			}
			lru = append(lru, lruEntry(t, tr, 16<<10))
			if len(lru) == capacity && full == 0 {
				full = request
			}
		}
		act := record(t, tr, 1<<20)
		require.NoError(t, tr.Release(act))
		require.NoError(t, w.Tick())
		if full > 0 && request == full+track.DefaultWindows+1 {
			assert.Empty(t, w.Suspects(), "a full cache is no suspect")
		}
	}
	require.NotZero(t, full)
	for _, s := range log.all() {
		assert.LessOrEqual(t, s.SinceWindow, uint64(full+1), "flagged only while filling")
	}
	assert.Empty(t, w.Suspects())
	release(t, tr, lru...)
}

//go:noinline
func burst(t testing.TB, tr *track.Tracker, bytes int64) *track.Record { return record(t, tr, bytes) }

func TestSurvivorsBurstyTransientsAreNoSuspect(t *testing.T) {
	tr, w, log := agedWatcher(t)
	rng := rand.New(rand.NewPCG(7, 8))
	weights := record(t, tr, 64<<20) // loaded once, kept
	var pending []*track.Record
	for request := 1; request <= 1000; request++ {
		release(t, tr, pending...)
		pending = pending[:0]
		n := 1
		if rng.IntN(10) == 0 {
			n = 20 + rng.IntN(20) // a burst
		}
		for range n {
			r := burst(t, tr, 256<<10+int64(rng.IntN(7*256<<10)))
			if rng.IntN(2) == 0 {
				pending = append(pending, r) // live past the window's end
			} else {
				require.NoError(t, tr.Release(r))
			}
		}
		require.NoError(t, w.Tick())
	}
	assert.Empty(t, log.all(), "bursty transients are no suspect")
	require.NoError(t, tr.Release(weights))
}

func TestSurvivorsSecondWatcherTakesTheClockWhenTheFirstStops(t *testing.T) {
	tr, first, _ := agedWatcher(t)
	log := &suspectLog{}
	second, err := track.NewWatcher(tr, track.OnSuspect(log.add))
	require.NoError(t, err)
	var kept []*track.Record
	for range 20 {
		kept = append(kept, seedMask(t, tr, 64))
		require.NoError(t, second.Tick()) // the first drives the clock: no age passes
	}
	assert.Empty(t, log.all(), "the second watcher does not move the first one's clock")
	require.NoError(t, first.Stop())
	for range 20 {
		kept = append(kept, seedMask(t, tr, 64))
		require.NoError(t, second.Tick())
	}
	assert.NotEmpty(t, log.all(), "once the first stopped, the second drives the clock")
	release(t, tr, kept...)
}
