package watch_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// leakBlock is the leaking line of the forecast tests: 32 KiB a request,
// kept.
//
//go:noinline
func leakBlock(ctx context.Context, p *pool.Pool) (*tensor.Tensor, error) {
	return tensor.New(ctx, p, tensor.Uint8, 32<<10)
}

//go:noinline
func activations(ctx context.Context, p *pool.Pool, bytes int) (*tensor.Tensor, error) {
	return tensor.New(ctx, p, tensor.Uint8, bytes)
}

// forecastRun is a service leaking through a pool with a 4 MiB budget,
// whose first suspect's forecast is held against the moment the budget
// really runs out. It runs in a synctest bubble: time is fake and every
// request's time is set by the test.
type forecastRun struct {
	tr *track.Tracker
	p  *pool.Pool
	w  *watch.Watcher

	mu      sync.Mutex
	first   *watch.Suspect
	flagged time.Time // fake time of the first flag
	oomAt   time.Time // fake time of the first allocation refused
	kept    []*tensor.Tensor
}

func newForecastRun(t *testing.T) *forecastRun {
	tr, err := track.New()
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(4<<20))
	require.NoError(t, err)
	f := &forecastRun{tr: tr, p: p}
	f.w, err = watch.New(tr, watch.OnSuspect(func(s watch.Suspect) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.first == nil {
			f.first, f.flagged = &s, time.Now()
		}
	}))
	require.NoError(t, err)
	return f
}

// request serves one request: activations held for hold of fake time,
// then the leak; it reports false once the budget has run out.
func (f *forecastRun) request(t *testing.T, rng *rand.Rand, inFlight int, hold time.Duration) bool {
	ctx, end := track.WithRequest(context.Background())
	defer end()
	var held []*tensor.Tensor
	defer func() {
		for _, x := range held {
			assert.NoError(t, x.Free())
		}
	}()
	ok := func(err error) bool {
		if errors.Is(err, tensor.ErrOutOfMemory) {
			f.mu.Lock()
			if f.oomAt.IsZero() {
				f.oomAt = time.Now()
			}
			f.mu.Unlock()
			return false
		}
		require.NoError(t, err)
		return true
	}
	for range inFlight {
		x, err := activations(ctx, f.p, 8<<10+rng.IntN(24<<10))
		if !ok(err) {
			return false
		}
		held = append(held, x)
	}
	<-time.After(hold)
	x, err := leakBlock(ctx, f.p)
	if !ok(err) {
		return false
	}
	f.mu.Lock()
	f.kept = append(f.kept, x)
	f.mu.Unlock()
	return true
}

// check holds the first forecast against the real time to out of memory.
func (f *forecastRun) check(t *testing.T, within float64) {
	require.NotNil(t, f.first, "the leak is flagged")
	require.False(t, f.oomAt.IsZero(), "the budget runs out")
	s := f.first
	assert.Equal(t, watch.HeadroomPoolBudget, s.HeadroomOf)
	assert.Equal(t, "host", s.Device)
	require.Positive(t, s.RunsOutIn, "a forecast at the first flag")
	real := f.oomAt.Sub(f.flagged)
	miss := (s.RunsOutIn.Seconds() - real.Seconds()) / real.Seconds()
	t.Logf("forecast at the flag %v (%.0f KiB/s, %d KiB left), ran out %v later: off by %+.0f%%",
		s.RunsOutIn, s.GrowthPerSecond/1024, s.Headroom>>10, real, 100*miss)
	assert.InDelta(t, 0, miss, within)
	for _, x := range f.kept {
		assert.NoError(t, x.Free())
	}
}

// A steady leak of 32 KiB a request, a request every ~2 ms: the forecast
// made at the first flag is within 25% of the moment the 4 MiB budget runs
// out.
func TestForecastOfASteadyLeak(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		synctest.Test(t, func(t *testing.T) {
			f := newForecastRun(t)
			rng := rand.New(rand.NewPCG(seed, 0xf0))
			for f.request(t, rng, 2, 1500*time.Microsecond+time.Duration(rng.IntN(1000))*time.Microsecond) {
				require.NoError(t, f.w.Tick())
			}
			f.check(t, 0.25)
			now := f.w.Suspects()
			require.Len(t, now, 1)
			assert.Positive(t, now[0].RunsOutIn, "updated while the site is a suspect")
			assert.Less(t, now[0].RunsOutIn, f.first.RunsOutIn)
		})
	}
}

// The same leak amid bursty traffic from 4 goroutines, each serving a
// request every 4 to 10 ms that holds up to 3 activations for up to 2 ms:
// within 40%. Requests land in uneven windows, several at once or none for
// a while, and the first flag comes after a few of them: the forecast is
// as good as the rate those few windows show.
func TestForecastUnderBurstyTraffic(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newForecastRun(t)
				var wg sync.WaitGroup
				var stop sync.Once
				done := make(chan struct{})
				for g := range uint64(4) {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(seed, g))
						<-time.After(time.Duration(rng.IntN(8000)) * time.Microsecond) // each its own phase
						for {
							select {
							case <-done:
								return
							default:
							}
							<-time.After(4*time.Millisecond + time.Duration(rng.IntN(4000))*time.Microsecond)
							if !f.request(t, rng, rng.IntN(4), time.Duration(rng.IntN(2000))*time.Microsecond) {
								stop.Do(func() { close(done) })
								return
							}
							assert.NoError(t, f.w.Tick())
						}
					})
				}
				wg.Wait()
				f.check(t, 0.40)
			})
		})
	}
}

// A service that holds a steady set (a bounded cache, activations in
// flight) is no suspect and gets no forecast.
func TestNoForecastForASteadySet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newForecastRun(t)
		owner := &track.Owner{Name: "prompt cache", MaxBytes: 1 << 20}
		var cache []*tensor.Tensor
		rng := rand.New(rand.NewPCG(9, 9))
		for range 1000 {
			ctx, end := track.WithRequest(context.Background())
			x, err := activations(ctx, f.p, 8<<10+rng.IntN(56<<10))
			require.NoError(t, err)
			<-time.After(2 * time.Millisecond)
			e, err := leakBlock(ctx, f.p)
			require.NoError(t, err)
			require.NoError(t, e.HandTo(owner))
			cache = append(cache, e)
			if len(cache) > 16 {
				require.NoError(t, cache[0].Free())
				cache = cache[1:]
			}
			require.NoError(t, x.Free())
			end()
			require.NoError(t, f.w.Tick())
		}
		assert.Nil(t, f.first)
		assert.Empty(t, f.w.Suspects())
		for _, e := range cache {
			require.NoError(t, e.Free())
		}
	})
}

// What runs out, and when the forecast is unknown.
func TestForecastHeadroom(t *testing.T) {
	leak := func(t *testing.T, p *pool.Pool, w *watch.Watcher, sleep time.Duration) []*tensor.Tensor {
		var kept []*tensor.Tensor
		for range 10 {
			<-time.After(sleep)
			ctx, end := track.WithRequest(context.Background())
			x, err := leakBlock(ctx, p)
			require.NoError(t, err)
			kept = append(kept, x)
			end()
			require.NoError(t, w.Tick())
		}
		return kept
	}
	setup := func(t *testing.T, opts ...pool.Option) (*pool.Pool, *watch.Watcher) {
		tr, err := track.New()
		require.NoError(t, err)
		dev, err := tensor.NewHostDevice(64 << 20)
		require.NoError(t, err)
		p, err := pool.New(dev, append(opts, pool.Tracker(tr))...)
		require.NoError(t, err)
		w, err := watch.New(tr, watch.OnSuspect(func(watch.Suspect) {}))
		require.NoError(t, err)
		return p, w
	}
	free := func(t *testing.T, kept []*tensor.Tensor) {
		for _, x := range kept {
			require.NoError(t, x.Free())
		}
	}
	t.Run("a pool without a budget: the device's free memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, w := setup(t)
			kept := leak(t, p, w, time.Second)
			s := w.Suspects()
			require.Len(t, s, 1)
			assert.Equal(t, watch.HeadroomDeviceMemory, s[0].HeadroomOf)
			assert.Equal(t, int64(64<<20-10*32<<10), s[0].Headroom)
			assert.InDelta(t, 32<<10, s[0].GrowthPerSecond, 1)
			assert.Equal(t, time.Duration(float64(s[0].Headroom)/float64(32<<10)*float64(time.Second)), s[0].RunsOutIn)
			free(t, kept)
		})
	})
	t.Run("windows that took no time: unknown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, w := setup(t, pool.Budget(4<<20))
			kept := leak(t, p, w, 0) // the fake clock never moves
			s := w.Suspects()
			require.Len(t, s, 1)
			assert.Equal(t, watch.HeadroomPoolBudget, s[0].HeadroomOf)
			assert.Equal(t, int64(4<<20-10*32<<10), s[0].Headroom)
			assert.Zero(t, s[0].RunsOutIn, "no rate without time")
			free(t, kept)
		})
	})
	t.Run("no allocator tells: unknown", func(t *testing.T) {
		tr, w, _ := watchedTracker(t, "bare")
		site := &siteDriver{tr: tr, bytes: 8192}
		for win := 1; win <= 10; win++ {
			site.setLive(t, win)
			require.NoError(t, w.Tick())
		}
		s := w.Suspects()
		require.Len(t, s, 1)
		assert.Equal(t, "host", s[0].Device)
		assert.Empty(t, s[0].HeadroomOf)
		assert.Zero(t, s[0].RunsOutIn)
		site.setLive(t, 0)
	})
}

// manualClock is a tracker clock the test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// A watcher times its windows on its tracker's clock (track.Clock), as the
// tracker times ages and snapshots: a leak of 32 KiB a window, one window
// a fake second, grows at 32 KiB/s however fast the test runs.
func TestWindowsAreTimedOnTheTrackersClock(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := &manualClock{now: start}
	tr, err := track.New(track.Clock(clock.Now))
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr), pool.Budget(4<<20))
	require.NoError(t, err)
	var first *watch.Suspect
	w, err := watch.New(tr, watch.OnSuspect(func(s watch.Suspect) {
		if first == nil {
			first = &s
		}
	}))
	require.NoError(t, err)
	var kept []*tensor.Tensor
	for i := 0; i < 40 && first == nil; i++ {
		ctx, end := track.WithRequest(context.Background())
		x, err := leakBlock(ctx, p)
		require.NoError(t, err)
		kept = append(kept, x)
		end()
		clock.advance(time.Second)
		require.NoError(t, w.Tick())
	}
	require.NotNil(t, first, "the leak is flagged")
	assert.InDelta(t, 32<<10, first.GrowthPerSecond, 1, "bytes per second of the tracker's clock")
	assert.False(t, first.Since.Before(start), "flagged at a time of the tracker's clock")
	assert.False(t, first.Since.After(clock.Now()))
	for _, x := range kept {
		require.NoError(t, x.Free())
	}
}
