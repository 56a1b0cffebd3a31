package watch_test

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/mask"
	"github.com/tensorlife/tensorlife/pool"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// promptCache is a service's shared prompt masks: a mask.Cache over a pool.
type promptCache struct {
	tr      *track.Tracker
	p       *pool.Pool
	masks   *mask.Builder
	cache   *mask.Cache
	w       *watch.Watcher
	log     *suspectLog
	logText *bytes.Buffer
}

func newPromptCache(t *testing.T) *promptCache {
	tr, err := track.New(track.Name("prompts"))
	require.NoError(t, err)
	dev, err := tensor.NewHostDevice(64 << 20)
	require.NoError(t, err)
	p, err := pool.New(dev, pool.Tracker(tr))
	require.NoError(t, err)
	b, err := mask.NewBuilder(p)
	require.NoError(t, err)
	c, err := mask.NewCache(mask.CacheTracker(tr), mask.MaxBytes(1<<20))
	require.NoError(t, err)
	pc := &promptCache{tr: tr, p: p, masks: b, cache: c, log: &suspectLog{}, logText: &bytes.Buffer{}}
	logger := slog.New(slog.NewTextHandler(pc.logText, nil))
	pc.w, err = watch.New(tr, watch.OnSuspect(func(s watch.Suspect) {
		pc.log.add(s)
		if s.IsHandle() {
			logger.Warn("handle", slog.String("site", s.Site.String()))
		}
	}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return pc
}

// prompt returns the request's handle on the shared mask of a 64-token
// prompt, built on the first call and a cache hit after.
func (pc *promptCache) prompt(t *testing.T, ctx context.Context) *tensor.Tensor {
	m, err := pc.cache.GetOrBuild(ctx, "prompt/64", func(ctx context.Context) (*tensor.Tensor, error) {
		return pc.masks.Causal(ctx, 64)
	})
	require.NoError(t, err)
	return m
}

// forgetsAHandle is the bug: a request takes the prompt's mask from the
// cache and never frees its handle.
//
//go:noinline
func (pc *promptCache) forgetsAHandle(t *testing.T, ctx context.Context) *tensor.Tensor {
	return pc.prompt(t, ctx)
}

// namedForgotten asserts that the one suspect named so far is the
// forgotten handle, named by the line that took it on the path that
// forgot it while the cache keeps the mask, and returns it.
func (pc *promptCache) namedForgotten(t *testing.T, forgotten *tensor.Tensor) watch.Suspect {
	t.Helper()
	require.Len(t, pc.log.all(), 1, "named at the first window after the request's end")
	s := pc.log.all()[0]
	assert.True(t, s.IsHandle())
	assert.Equal(t, int64(1), s.Handles)
	assert.Contains(t, s.Site.Location().Function, "promptCache).prompt", "the line that took it: GetOrBuild's caller")
	assert.Contains(t, s.Site.Stack(""), "forgetsAHandle", "on the path that forgot it")
	assert.Equal(t, forgotten.HeldBytes(), s.OutlivedBytes)
	assert.Equal(t, int64(1), pc.cache.Stats().Entries, "the cache still keeps the mask")
	return s
}

// request serves one request that uses the prompt's mask through serve,
// then ends it and the window.
func (pc *promptCache) request(t *testing.T, serve func(ctx context.Context)) {
	ctx, end := track.WithRequest(context.Background())
	serve(ctx)
	end()
	require.NoError(t, pc.w.Tick())
}

// A handle a request took from a cache hit and did not free is named at
// the first window after the request ended, with the line that took it,
// while the cache still keeps the mask: no growth is waited for. A freed
// handle, or one handed to an owner, is not outlived; freeing the
// forgotten one clears it at once.
func TestHandleThatOutlivedItsRequestIsNamedAtItsEnd(t *testing.T) {
	pc := newPromptCache(t)
	freeIt := func(ctx context.Context) { require.NoError(t, pc.prompt(t, ctx).Free()) }
	for range 20 { // the first builds the mask, the rest are hits, each freed
		pc.request(t, freeIt)
	}
	require.Zero(t, pc.w.SuspectCount(), "freed handles outlive nothing")

	var forgotten *tensor.Tensor
	pc.request(t, func(ctx context.Context) { forgotten = pc.forgetsAHandle(t, ctx) })
	s := pc.namedForgotten(t, forgotten)
	assert.Equal(t, uint64(21), s.SinceWindow)
	assert.Equal(t, 1, pc.w.SuspectCount())
	assert.Equal(t, int64(1), pc.tr.Totals().Event(track.EventLeakSuspect))
	assert.Contains(t, pc.logText.String(), "promptCache).prompt")

	owner := track.Owner{Name: "sessions", MaxBytes: 1 << 20}
	var kept *tensor.Tensor
	for range 10 { // freed ones, and one handed to an owner: nothing new
		pc.request(t, freeIt)
	}
	pc.request(t, func(ctx context.Context) {
		kept = pc.prompt(t, ctx)
		require.NoError(t, kept.HandTo(&owner))
	})
	assert.Len(t, pc.log.all(), 1, "a handle handed to an owner is not outlived")
	now := pc.w.Suspects()
	require.Len(t, now, 1, "the forgotten handle stays named: it is still held")
	assert.Equal(t, s.SinceWindow, now[0].SinceWindow)

	require.NoError(t, forgotten.Free())
	require.NoError(t, pc.w.Tick())
	assert.Zero(t, pc.w.SuspectCount(), "freed: cleared at once")
	require.NoError(t, kept.Free())
	runtime.KeepAlive(pc.p)
}

// The request that built the mask, a miss, and forgot its handle is named
// as a hit's would be: at the first window after its end, at the line that
// called GetOrBuild, while the cache keeps the mask.
func TestHandleForgottenOnAMissIsNamedAtItsEnd(t *testing.T) {
	pc := newPromptCache(t)
	var forgotten *tensor.Tensor
	pc.request(t, func(ctx context.Context) { forgotten = pc.forgetsAHandle(t, ctx) })
	pc.namedForgotten(t, forgotten)
	assert.Equal(t, int64(1), pc.cache.Stats().Misses)

	for range 10 { // hits, each freed: nothing new
		pc.request(t, func(ctx context.Context) { require.NoError(t, pc.prompt(t, ctx).Free()) })
	}
	assert.Len(t, pc.log.all(), 1)
	require.NoError(t, forgotten.Free())
	require.NoError(t, pc.w.Tick())
	assert.Zero(t, pc.w.SuspectCount(), "freed: cleared at once")
	runtime.KeepAlive(pc.p)
}

// A handle taken under no request (Get) states no lifetime, and nothing
// is judged; one taken after its request ended has outlived it at once.
func TestHandleUnderNoRequestIsNotJudged(t *testing.T) {
	pc := newPromptCache(t)
	pc.request(t, func(ctx context.Context) { require.NoError(t, pc.prompt(t, ctx).Free()) })
	m, ok := pc.cache.Get("prompt/64")
	require.True(t, ok)
	require.NoError(t, pc.w.Tick())
	assert.Zero(t, pc.w.SuspectCount())

	ctx, end := track.WithRequest(context.Background())
	end()
	late := pc.forgetsAHandle(t, ctx)
	require.NoError(t, pc.w.Tick())
	s := pc.w.Suspects()
	require.Len(t, s, 1)
	assert.True(t, s[0].IsHandle())
	require.NoError(t, late.Free())
	require.NoError(t, m.Free())
	require.NoError(t, pc.w.Tick())
	assert.Zero(t, pc.w.SuspectCount())
}
