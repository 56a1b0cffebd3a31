package track_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/track"
)

// serveKind runs one request with the labels kv that holds peak bytes at
// once (two tensors at its largest) for d on clk, and ends it.
func serveKind(t *testing.T, tr *track.Tracker, clk *fakeClock, peak int64, d time.Duration, kv ...string) {
	t.Helper()
	ctx, end := track.WithRequest(context.Background())
	ctx = track.WithLabels(ctx, kv...)
	half := recordA(tr, ctx, peak/2, "tensor")
	rest := recordA(tr, ctx, peak-peak/2, "tensor")
	release(t, tr, half, rest)
	small := recordA(tr, ctx, 1, "tensor") // below its peak
	release(t, tr, small)
	clk.advance(d)
	end()
}

func kindNamed(t *testing.T, kinds []track.RequestKindStats, kind string) track.RequestKindStats {
	t.Helper()
	for _, k := range kinds {
		if k.Kind == kind {
			return k
		}
	}
	require.Failf(t, "no kind", "%q in %+v", kind, kinds)
	return track.RequestKindStats{}
}

// inBucket asserts that got lies in the histogram bucket of want.
func inBucket(t *testing.T, k track.RequestKindStats, want, got int64) {
	t.Helper()
	for _, b := range k.Peaks {
		if b.Low <= want && want < b.High {
			assert.True(t, b.Low <= got && got < b.High, "%d and %d in one bucket [%d, %d)", want, got, b.Low, b.High)
			assert.Less(t, float64(b.High-b.Low), float64(b.Low)/8+1, "a bucket is at most 1/8 wide")
			return
		}
	}
	t.Errorf("no bucket holds %d", want)
}

// Request peaks per kind: p50 and max exact, p99 within one bucket.
func TestRequestCostsPerKind(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	tr := newTracker(t, track.Clock(clk.Now), track.RequestKinds("route", "model"))

	// chat: 60 requests at 1 MiB, 39 at 2 MiB, 1 at 8 MiB.
	for i := range 100 {
		peak := int64(1 << 20)
		switch {
		case i >= 99:
			peak = 8 << 20
		case i >= 60:
			peak = 2 << 20
		}
		serveKind(t, tr, clk, peak, time.Duration(i+1)*time.Millisecond, "route", "/chat", "model", "llama", "request", fmt.Sprint(i))
	}
	// embed: peaks 1 KiB..100 KiB, a bucket holding several of them.
	for i := 1; i <= 100; i++ {
		serveKind(t, tr, clk, int64(i)<<10, time.Second, "route", "/embed")
	}
	serveKind(t, tr, clk, 4096, time.Second, "tenant", "acme") // none of the keys

	kinds := tr.RequestCosts()
	require.Len(t, kinds, 3)
	assert.Equal(t, "route=/chat model=llama", kinds[0].Kind, "kinds by name, other last")
	assert.Equal(t, track.OtherKind, kinds[2].Kind)

	chat := kinds[0]
	assert.Equal(t, "host", chat.Device)
	assert.Equal(t, int64(100), chat.Requests)
	assert.Equal(t, int64(1<<20), chat.PeakP50, "exact")
	assert.Equal(t, int64(2<<20), chat.PeakP99)
	assert.Equal(t, int64(8<<20), chat.PeakMax, "exact")
	inBucket(t, chat, 2<<20, chat.PeakP99)
	assert.Equal(t, 50*time.Millisecond, chat.DurationP50)
	assert.Equal(t, 100*time.Millisecond, chat.DurationMax)
	assert.Zero(t, chat.OutlivedBytes)

	embed := kindNamed(t, kinds, "route=/embed")
	assert.Equal(t, int64(100), embed.Requests)
	assert.Equal(t, int64(100<<10), embed.PeakMax, "exact")
	inBucket(t, embed, 50<<10, embed.PeakP50)
	inBucket(t, embed, 99<<10, embed.PeakP99)
	assert.GreaterOrEqual(t, embed.PeakP99, int64(99<<10), "never below the true percentile")
	var counted int64
	for _, b := range embed.Peaks {
		counted += b.Count
		assert.True(t, b.Low <= b.Max && b.Max < b.High)
	}
	assert.Equal(t, embed.Requests, counted)

	other := kinds[2]
	assert.Equal(t, int64(1), other.Requests)
	assert.Equal(t, int64(4096), other.PeakMax)
}

// A request's end counts what it still held as outlived; one that never
// recorded is counted nowhere; a request begun by WithLabels counts when a
// reader sees its context done.
func TestRequestCostsOutlivedAndContexts(t *testing.T) {
	tr := newTracker(t, track.RequestKinds("route"))
	ctx, end := track.WithRequest(context.Background())
	kept := recordA(tr, track.WithLabels(ctx, "route", "/leaky"), 300, "tensor")
	end()
	_, none := track.WithRequest(context.Background())
	none()

	parent, cancel := context.WithCancel(context.Background())
	r := recordA(tr, track.WithLabels(parent, "route", "/stream"), 64, "tensor")
	release(t, tr, r)
	cancel()

	kinds := tr.RequestCosts()
	require.Len(t, kinds, 2)
	leaky := kindNamed(t, kinds, "route=/leaky")
	assert.Equal(t, int64(300), leaky.OutlivedBytes)
	assert.Equal(t, int64(300), leaky.PeakMax)
	stream := kindNamed(t, kinds, "route=/stream")
	assert.Equal(t, int64(1), stream.Requests)
	assert.Equal(t, int64(64), stream.PeakMax)
	release(t, tr, kept)
}

// A key with unbounded values makes at most MaxRequestKinds kinds: the rest
// are one "other" kind.
func TestRequestCostsBounded(t *testing.T) {
	tr := newTracker(t, track.RequestKinds("request"))
	for i := range track.MaxRequestKinds + 50 {
		ctx, end := track.WithRequest(context.Background())
		release(t, tr, recordA(tr, track.WithLabels(ctx, "request", fmt.Sprint(i)), 8, "tensor"))
		end()
	}
	kinds := tr.RequestCosts()
	assert.Len(t, kinds, track.MaxRequestKinds+1)
	other := kinds[len(kinds)-1]
	assert.Equal(t, track.OtherKind, other.Kind)
	assert.Equal(t, int64(50), other.Requests)

	plain := newTracker(t)
	assert.Nil(t, plain.RequestCosts(), "no statistics without RequestKinds")
}

func TestRequestKindsOption(t *testing.T) {
	for _, keys := range [][]string{nil, {""}, {"a", "a"}, {"a", "b", "c", "d", "e"}} {
		_, err := track.New(track.RequestKinds(keys...))
		assert.ErrorIs(t, err, track.ErrInvalidOption, "%q", keys)
	}
	_, err := track.New(track.RequestKinds("route", "model"))
	assert.NoError(t, err)
}

// The histogram's buckets cover every value, each at most 1/8 wide.
func TestRequestCostsHistogramExtremes(t *testing.T) {
	tr := newTracker(t, track.RequestKinds("k"))
	for _, v := range []int64{0, 1, 7, 8, 9, 15, 16, 1000, math.MaxInt64 / 4} {
		ctx, end := track.WithRequest(context.Background())
		r := recordA(tr, track.WithLabels(ctx, "k", "v"), v, "tensor")
		release(t, tr, r)
		end()
	}
	k := tr.RequestCosts()[0]
	assert.Equal(t, int64(math.MaxInt64/4), k.PeakMax)
	for _, b := range k.Peaks {
		assert.True(t, b.Low <= b.Max && b.Max < b.High, "%+v", b)
	}
}
