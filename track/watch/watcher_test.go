package watch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// siteDriver holds allocations made at one call site and sets how many are
// live. Its records take their site from the line that calls setLive, so
// each driver must be set from one line only.
type siteDriver struct {
	tr    *track.Tracker
	bytes int64
	recs  []*track.Record
}

//go:noinline
func (d *siteDriver) setLive(t testing.TB, n int) {
	t.Helper()
	for len(d.recs) < n {
		r := &track.Record{Bytes: d.bytes, Meta: track.InternMeta("mask", "host", "bool", []int{int(d.bytes)})}
		require.NoError(t, d.tr.Books().Record(context.Background(), r, 1))
		d.recs = append(d.recs, r)
	}
	for len(d.recs) > n {
		require.NoError(t, (d.recs[len(d.recs)-1]).Release())
		d.recs = d.recs[:len(d.recs)-1]
	}
}

// suspectLog collects what OnSuspect reports, safe for concurrent use.
type suspectLog struct {
	mu  sync.Mutex
	got []watch.Suspect
}

func (l *suspectLog) add(s watch.Suspect) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, s)
}

func (l *suspectLog) all() []watch.Suspect {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]watch.Suspect(nil), l.got...)
}

func newWatchedTracker(t *testing.T, opts ...watch.Option) (*track.Tracker, *watch.Watcher, *suspectLog) {
	t.Helper()
	// These tests drive the growth rules with live bytes they set directly,
	// made under no request: every live byte has outlived its request.
	return watchedTracker(t, "watched", opts...)
}

// watchedTracker returns a tracker of the given name and a watcher of it,
// made with opts, whose suspects are collected.
func watchedTracker(t *testing.T, name string, opts ...watch.Option) (*track.Tracker, *watch.Watcher, *suspectLog) {
	t.Helper()
	tr, err := track.New(track.Name(name))
	require.NoError(t, err)
	log := &suspectLog{}
	w, err := watch.New(tr, append([]watch.Option{watch.OnSuspect(log.add)}, opts...)...)
	require.NoError(t, err)
	return tr, w, log
}

func TestWatcherRejectsBadInput(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	tests := []struct {
		name string
		opts []watch.Option
	}{
		{"zero ticks", []watch.Option{watch.EveryTicks(0)}},
		{"negative ticks", []watch.Option{watch.EveryTicks(-1)}},
		{"zero interval", []watch.Option{watch.Every(0)}},
		{"negative interval", []watch.Option{watch.Every(-time.Second)}},
		{"busy-loop interval", []watch.Option{watch.Every(time.Nanosecond)}},
		{"ticks and interval", []watch.Option{watch.EveryTicks(2), watch.Every(time.Second)}},
		{"zero windows", []watch.Option{watch.Windows(0)}},
		{"negative windows", []watch.Option{watch.Windows(-3)}},
		{"windows over default history", []watch.Option{watch.Windows(watch.DefaultHistory + 1)}},
		{"windows over history", []watch.Option{watch.Windows(10), watch.History(9)}},
		{"zero history", []watch.Option{watch.History(0)}},
		{"huge history", []watch.Option{watch.History(1 << 20)}},
		{"zero most-of", []watch.Option{watch.MostOf(0)}},
		{"most-of over windows", []watch.Option{watch.Windows(4), watch.MostOf(5)}},
		{"negative growth", []watch.Option{watch.MinGrowth(-1)}},
		{"negative warm-up", []watch.Option{watch.WarmUp(-1)}},
		{"nil callback", []watch.Option{watch.OnSuspect(nil)}},
		{"nil option", []watch.Option{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := watch.New(tr, tt.opts...)
			assert.ErrorIs(t, err, watch.ErrInvalidOption)
			assert.Nil(t, w)
		})
	}
	t.Run("nil tracker", func(t *testing.T) {
		_, err := watch.New(nil)
		assert.ErrorIs(t, err, track.ErrNilTracker)
	})
	t.Run("windows equal to history", func(t *testing.T) {
		_, err := watch.New(tr, watch.Windows(12), watch.History(12))
		assert.NoError(t, err)
	})
}

func TestWatcherFlagsGrowth(t *testing.T) {
	tr, w, log := newWatchedTracker(t)
	leak := &siteDriver{tr: tr, bytes: 4096}
	steady := &siteDriver{tr: tr, bytes: 1 << 20}
	for req := 1; req <= 20; req++ {
		steady.setLive(t, 3) // a request's working set, freed at its end
		leak.setLive(t, req)
		steady.setLive(t, 0)
		require.NoError(t, w.Tick())
		if req < 6 {
			assert.Empty(t, log.all(), "flagged after %d requests", req)
		}
	}

	got := log.all()
	require.Len(t, got, 1, "reported once, not every window")
	s := got[0]
	assert.Equal(t, uint64(6), s.SinceWindow, "6 of 8 windows grew")
	assert.Equal(t, 6, s.Grew)
	assert.Equal(t, watch.DefaultWindows, s.OfWindows)
	assert.Equal(t, int64(4096), s.GrowthPerWindow)
	assert.Equal(t, int64(6*4096), s.LiveBytes)
	assert.Equal(t, int64(6), s.LiveCount)
	assert.Zero(t, s.BaselineBytes)
	assert.Contains(t, s.Site.Location().Function, "TestWatcherFlagsGrowth")
	assert.False(t, s.Since.IsZero())

	now := w.Suspects()
	require.Len(t, now, 1)
	assert.Same(t, s.Site, now[0].Site)
	assert.Equal(t, int64(20*4096), now[0].LiveBytes, "suspects follow the site's growth")
	assert.Equal(t, 8, now[0].Grew)
	assert.Equal(t, int64(4096), now[0].GrowthPerWindow)
	assert.Equal(t, int64(1), tr.Totals().Event(track.EventLeakSuspect))
	assert.Equal(t, uint64(20), w.WindowsEnded())
}

// A ramp during the warm-up (work in flight growing with load) is not a
// leak; growth after it is judged from where the warm-up ended.
func TestWatcherWarmUp(t *testing.T) {
	tr, w, log := newWatchedTracker(t, watch.WarmUp(10))
	inFlight := &siteDriver{tr: tr, bytes: 64 << 10}
	leak := &siteDriver{tr: tr, bytes: 4096}
	for req := 1; req <= 10; req++ {
		inFlight.setLive(t, req) // the ramp: more requests in flight each window
		require.NoError(t, w.Tick())
	}
	for req := 11; req <= 40; req++ {
		leak.setLive(t, req-10)
		require.NoError(t, w.Tick())
	}
	got := log.all()
	require.Len(t, got, 1, "the ramp is not flagged, the leak is")
	assert.Same(t, leak.recs[0].Site(), got[0].Site)
	assert.Equal(t, uint64(16), got[0].SinceWindow, "flagged 6 windows after the warm-up")
	assert.Equal(t, int64(4096), got[0].GrowthPerWindow, "growth measured from the warm-up's end")
	inFlight.setLive(t, 0)
	leak.setLive(t, 0)

	// Without the warm-up the same ramp is taken for a leak.
	tr2, w2, log2 := newWatchedTracker(t)
	ramp := &siteDriver{tr: tr2, bytes: 64 << 10}
	for req := 1; req <= 10; req++ {
		ramp.setLive(t, req)
		require.NoError(t, w2.Tick())
	}
	assert.NotEmpty(t, log2.all())
	ramp.setLive(t, 0)
}

func TestWatcherPlateau(t *testing.T) {
	tests := []struct {
		name        string
		growFor     int    // windows of growth before the plateau
		wantFlag    uint64 // window that flags it; 0 for never
		wantCleared uint64 // first window it is no longer a suspect
	}{
		{"warm-up shorter than most-of", 5, 0, 0},
		{"growth then plateau", 10, 6, 26},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, w, log := newWatchedTracker(t)
			site := &siteDriver{tr: tr, bytes: 8192}
			var cleared uint64
			for win := 1; win <= 40; win++ {
				site.setLive(t, min(win, tt.growFor))
				require.NoError(t, w.Tick())
				if len(log.all()) > 0 && cleared == 0 && len(w.Suspects()) == 0 {
					cleared = uint64(win)
				}
			}
			if tt.wantFlag == 0 {
				assert.Empty(t, log.all())
				return
			}
			require.Len(t, log.all(), 1)
			assert.Equal(t, tt.wantFlag, log.all()[0].SinceWindow)
			assert.Equal(t, tt.wantCleared, cleared, "cleared 2·K windows into the plateau")
		})
	}
}

func TestWatcherShrink(t *testing.T) {
	tests := []struct {
		name      string
		after     []int // live records in the windows after 8 windows of growth
		suspected []bool
	}{
		{"back to baseline", []int{0, 0}, []bool{false, false}},
		{"partly back, still growing over K", []int{7, 9}, []bool{true, true}},
		{"back to where the growth began", []int{2}, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := track.New()
			require.NoError(t, err)
			log := &suspectLog{}
			site := &siteDriver{tr: tr, bytes: 4096}
			var w *watch.Watcher
			for win := 0; win <= 8+len(tt.after); win++ {
				live := 2 + win // 2 live before the watcher starts, then growth
				if win > 8 {
					live = tt.after[win-9]
				}
				site.setLive(t, live)
				if win == 0 {
					w, err = watch.New(tr, watch.OnSuspect(log.add))
					require.NoError(t, err)
					continue
				}
				require.NoError(t, w.Tick())
				if win == 8 {
					require.Len(t, w.Suspects(), 1)
					require.Equal(t, int64(2*4096), log.all()[0].BaselineBytes)
				}
				if win > 8 {
					assert.Equal(t, tt.suspected[win-9], len(w.Suspects()) == 1, "window %d after growth", win-8)
				}
			}
			assert.Len(t, log.all(), 1)
		})
	}
}

func TestWatcherIgnoresNoise(t *testing.T) {
	tests := []struct {
		name string
		next func(rng *rand.Rand, live int) int
	}{
		{"uniform around a level", func(rng *rand.Rand, _ int) int { return 20 + rng.IntN(10) }},
		{"sessions opening and closing", func(rng *rand.Rand, live int) int {
			stay := 0
			for range live {
				if rng.IntN(5) != 0 {
					stay++
				}
			}
			return stay + rng.IntN(9) // about 4 new sessions a window: a level of 20
		}},
		{"rare spikes", func(rng *rand.Rand, _ int) int {
			if rng.IntN(4) == 0 {
				return 5 + rng.IntN(20)
			}
			return 5
		}},
	}
	for _, tt := range tests {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed %d", tt.name, seed), func(t *testing.T) {
				tr, err := track.New()
				require.NoError(t, err)
				rng := rand.New(rand.NewPCG(seed, 0x7e))
				site := &siteDriver{tr: tr, bytes: 64 << 10}
				log := &suspectLog{}
				var w *watch.Watcher
				live := 20
				for win := range 1001 {
					if win > 0 {
						live = tt.next(rng, live)
					}
					site.setLive(t, live)
					if win == 0 { // the level is live before the watcher starts
						w, err = watch.New(tr, watch.OnSuspect(log.add))
						require.NoError(t, err)
						continue
					}
					require.NoError(t, w.Tick())
				}
				assert.Empty(t, log.all())
				assert.Zero(t, tr.Totals().Event(track.EventLeakSuspect))
			})
		}
	}
}

func TestWatcherMinGrowth(t *testing.T) {
	tests := []struct {
		name     string
		opts     []watch.Option
		wantFlag bool
	}{
		{"default threshold ignores 100 bytes a window", nil, false},
		{"zero threshold flags it", []watch.Option{watch.MinGrowth(0)}, true},
		{"threshold just under the growth", []watch.Option{watch.MinGrowth(8*100 - 1)}, true},
		{"threshold equal to the growth", []watch.Option{watch.MinGrowth(8 * 100)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, w, log := newWatchedTracker(t, append(tt.opts, watch.MostOf(8))...)
			site := &siteDriver{tr: tr, bytes: 100}
			for win := 1; win <= 8; win++ {
				site.setLive(t, win)
				require.NoError(t, w.Tick())
			}
			assert.Equal(t, tt.wantFlag, len(log.all()) == 1)
		})
	}
}

func TestWatcherCountsTicksPerWindow(t *testing.T) {
	tr, w, log := newWatchedTracker(t, watch.EveryTicks(3), watch.Windows(4), watch.MostOf(4), watch.MinGrowth(0))
	site := &siteDriver{tr: tr, bytes: 512}
	for tick := 1; tick <= 12; tick++ {
		site.setLive(t, tick)
		require.NoError(t, w.Tick())
		assert.Equal(t, uint64(tick/3), w.WindowsEnded())
	}
	require.Len(t, log.all(), 1)
	assert.Equal(t, uint64(4), log.all()[0].SinceWindow)
	assert.Equal(t, int64(3*512), log.all()[0].GrowthPerWindow)
}

func TestWatcherStop(t *testing.T) {
	tr, w, log := newWatchedTracker(t, watch.MinGrowth(0))
	site := &siteDriver{tr: tr, bytes: 512}
	for win := 1; win <= 6; win++ {
		site.setLive(t, win)
		require.NoError(t, w.Tick())
	}
	require.Len(t, log.all(), 1)

	require.NoError(t, w.Stop())
	assert.ErrorIs(t, w.Stop(), watch.ErrStopped)
	assert.ErrorIs(t, w.Tick(), watch.ErrStopped)
	assert.Equal(t, uint64(6), w.WindowsEnded(), "a tick after Stop ends no window")
	assert.Len(t, w.Suspects(), 1, "suspects stay readable")
	assert.ErrorIs(t, w.Start(), watch.ErrWindowKind)
}

// Timed windows run in a synctest bubble: the clock moves only when every
// goroutine of the test waits, so each window ends at a known instant.
func TestWatcherTimedWindows(t *testing.T) {
	// In a synctest bubble the windows' clock is fake: elapse moves it, and
	// a window ends exactly when its time has come.
	t.Run("start and stop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, w, _ := newWatchedTracker(t, watch.Every(watch.MinEvery))
			assert.ErrorIs(t, w.Tick(), watch.ErrWindowKind)
			require.NoError(t, w.Start())
			assert.ErrorIs(t, w.Start(), watch.ErrRunning)
			assert.ErrorIs(t, w.Run(context.Background()), watch.ErrRunning)
			elapse(2 * watch.MinEvery)
			require.Equal(t, uint64(2), w.WindowsEnded())
			require.NoError(t, w.Stop())
			elapse(5 * watch.MinEvery)
			assert.Equal(t, uint64(2), w.WindowsEnded(), "no window ends after Stop returns")
			assert.ErrorIs(t, w.Stop(), watch.ErrStopped)
			assert.ErrorIs(t, w.Start(), watch.ErrStopped)
		})
	})
	t.Run("run until the context ends", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, w, _ := newWatchedTracker(t, watch.Every(watch.MinEvery))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			elapse(watch.MinEvery)
			require.Equal(t, uint64(1), w.WindowsEnded())
			cancel()
			assert.ErrorIs(t, <-done, context.Canceled)
			require.NoError(t, w.Stop())
		})
	})
	t.Run("run until stopped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, w, _ := newWatchedTracker(t, watch.Every(watch.MinEvery))
			done := make(chan error, 1)
			go func() { done <- w.Run(context.Background()) }()
			elapse(watch.MinEvery)
			require.Equal(t, uint64(1), w.WindowsEnded())
			require.NoError(t, w.Stop())
			assert.NoError(t, <-done)
		})
	})
	t.Run("stop from the callback", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tr, err := track.New()
			require.NoError(t, err)
			stopped := make(chan error, 1)
			var w *watch.Watcher
			w, err = watch.New(tr, watch.Every(watch.MinEvery), watch.Windows(1), watch.MostOf(1),
				watch.MinGrowth(0), watch.OnSuspect(func(watch.Suspect) { stopped <- w.Stop() }))
			require.NoError(t, err)
			site := &siteDriver{tr: tr, bytes: 512}
			site.setLive(t, 1)
			require.NoError(t, w.Start())
			assert.NoError(t, <-stopped, "the first window reports the site, and its callback stops the watcher")
			synctest.Wait()
			assert.Equal(t, uint64(1), w.WindowsEnded())
			assert.ErrorIs(t, w.Stop(), watch.ErrStopped)
			site.setLive(t, 0)
		})
	})
	t.Run("counted windows cannot run", func(t *testing.T) {
		_, w, _ := newWatchedTracker(t)
		assert.ErrorIs(t, w.Run(context.Background()), watch.ErrWindowKind)
	})
}

func TestWatcherDefaultReportLogs(t *testing.T) {
	var buf bytes.Buffer
	tr, err := track.New(track.Name("logged"), track.Logger(slog.New(slog.NewTextHandler(&buf, nil))))
	require.NoError(t, err)
	w, err := watch.New(tr)
	require.NoError(t, err)
	site := &siteDriver{tr: tr, bytes: 4096}
	for win := 1; win <= 6; win++ {
		site.setLive(t, win)
		require.NoError(t, w.Tick())
	}
	out := buf.String()
	assert.Contains(t, out, "level=WARN")
	assert.Contains(t, out, "leak suspect")
	assert.Contains(t, out, "tracker=logged")
	assert.Contains(t, out, "TestWatcherDefaultReportLogs")
	assert.Contains(t, out, "growth_per_window=4096")
	assert.Contains(t, out, "live_bytes=24576")
	assert.Contains(t, out, "runs_out_in=0s", "no allocator tells a headroom: unknown")
	assert.Contains(t, out, "tensor.(*Tensor).HandTo with a track.Owner", "the advice")
}

// The log line carries the forecast, and what runs out.
func TestWatcherLogsTheForecast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		tr, err := track.New(track.Name("logged"), track.Logger(slog.New(slog.NewTextHandler(&buf, nil))))
		require.NoError(t, err)
		dev, err := tensor.NewHostDevice(1 << 20)
		require.NoError(t, err)
		alloc, err := tensor.NewDeviceAllocator(dev, tr) // reaches the device's free memory
		require.NoError(t, err)
		defer runtime.KeepAlive(alloc) // the tracker holds its allocators weakly
		w, err := watch.New(tr)
		require.NoError(t, err)
		site := &siteDriver{tr: tr, bytes: 4096}
		for win := 1; win <= 6; win++ {
			<-time.After(time.Second)
			site.setLive(t, win)
			require.NoError(t, w.Tick())
		}
		out := buf.String()
		assert.Contains(t, out, "runs_out_in=4m16s", "1 MiB free at 4 KiB a second")
		assert.Contains(t, out, `runs_out_of="device memory on host"`)
		site.setLive(t, 0)
	})
}

func TestWatcherConcurrentTicks(t *testing.T) {
	tr, w, log := newWatchedTracker(t, watch.MinGrowth(0), watch.MostOf(1))
	var wg sync.WaitGroup
	var leakMu sync.Mutex
	leak := &siteDriver{tr: tr, bytes: 256}
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				r := &track.Record{Bytes: 128, Meta: track.InternMeta("tensor", "host", "", nil)}
				if err := tr.Books().Record(context.Background(), r, 0); err != nil {
					t.Error(err)
					return
				}
				if g == 0 {
					leakMu.Lock()
					leak.setLive(t, i+1)
					leakMu.Unlock()
				}
				if err := r.Release(); err != nil {
					t.Error(err)
				}
				if err := w.Tick(); err != nil && !errors.Is(err, watch.ErrStopped) {
					t.Error(err)
				}
				_ = w.Suspects()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, uint64(800), w.WindowsEnded())
	assert.NotEmpty(t, log.all(), "the growing site is flagged under concurrent ticks")
}

// agentRequest is one request of an agent loop: tokens decode steps, each
// building a mask of tokens×tokens bytes at one site. keep decides what
// happens to the mask after its step.
//
//go:noinline
func agentRequest(t *testing.T, tr *track.Tracker, tokens int, keep func(step int, mask *track.Record) bool) {
	for step := 1; step <= tokens; step++ {
		n := 128 + step
		mask := &track.Record{Bytes: int64(n * n), Meta: track.InternMeta("mask", "cuda:0", "bool", []int{n, n})}
		require.NoError(t, tr.Books().Record(context.Background(), mask, 0))
		if !keep(step, mask) {
			require.NoError(t, mask.Release())
		}
	}
}

func TestWatcherAgentLoop(t *testing.T) {
	tests := []struct {
		name     string
		requests int
		// keep returns a per-run keep function for agentRequest.
		keep func() func(step int, mask *track.Record) bool
		// wantBy is the request by which the mask site must be flagged; 0
		// means never.
		wantBy int
	}{
		{"leaky: every mask kept", 64, func() func(int, *track.Record) bool {
			return func(int, *track.Record) bool { return true }
		}, 64},
		{"fixed: every mask freed", longRun(10000), func() func(int, *track.Record) bool {
			return func(int, *track.Record) bool { return false }
		}, 0},
		{"fixed with a bounded cache of the longest mask per length bucket", longRun(2000), func() func(int, *track.Record) bool {
			longest := map[int]int{}
			return func(step int, _ *track.Record) bool {
				bucket := step / 8
				if step <= longest[bucket] {
					return false
				}
				longest[bucket] = step // kept for good, as a cache would
				return true
			}
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, w, log := newWatchedTracker(t)
			rng := rand.New(rand.NewPCG(1, 2))
			keep := tt.keep()
			flaggedAt := 0
			for req := 1; req <= tt.requests; req++ {
				agentRequest(t, tr, 16+rng.IntN(17), keep)
				require.NoError(t, w.Tick())
				if flaggedAt == 0 && len(log.all()) > 0 {
					flaggedAt = req
				}
			}
			if tt.wantBy == 0 {
				assert.Empty(t, log.all())
				return
			}
			require.NotZero(t, flaggedAt, "never flagged")
			assert.LessOrEqual(t, flaggedAt, tt.wantBy)
			assert.Contains(t, log.all()[0].Site.Location().Function, "agentRequest")
			t.Logf("flagged after %d requests", flaggedAt)
		})
	}
}

// elapse lets d pass on the clock of the synctest bubble it is called in,
// a little more so that what is due at d has happened, and returns once
// every other goroutine of the bubble is blocked: the windows due by then
// have ended.
func elapse(d time.Duration) {
	<-time.After(d + time.Microsecond)
	synctest.Wait()
}

// A window in which nothing changed makes nothing, with sites holding
// outlived bytes and a request open.
func TestEmptyWindowAllocatesNothing(t *testing.T) {
	tr, err := track.New()
	require.NoError(t, err)
	ctx, end := track.WithRequest(context.Background())
	defer end()
	r := &track.Record{Bytes: 256, Meta: track.InternMeta("mask", "host", "", nil)}
	require.NoError(t, tr.Books().Record(ctx, r, 0))
	w, err := watch.New(tr)
	require.NoError(t, err)
	require.NoError(t, w.Tick())
	assert.Zero(t, testing.AllocsPerRun(100, func() { require.NoError(t, w.Tick()) }))
	assert.Equal(t, uint64(101+1), w.WindowsEnded())
	require.NoError(t, r.Release())
}
