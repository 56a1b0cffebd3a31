package mask

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// outlivedBytes reads the tracker's outlived figure, as a watcher would.
func outlivedBytes(tr *track.Tracker) int64 { return tr.Totals().OutlivedBytes }

// TestCacheEvictionHandsBack guards that an eviction ends the cache's
// ownership: a mask a request still holds after the cache lets it go is
// that request's again, and outlived once the request has ended.
func TestCacheEvictionHandsBack(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c := newCache(t, MaxEntries(1))
	ctx, end := track.WithRequest(context.Background())
	m, err := b.Padding(ctx, []int{4}, 8)
	require.NoError(t, err)
	require.NoError(t, c.Put("a", m))
	end()
	assert.Zero(t, outlivedBytes(e.tr), "the cache holds it")

	putPadding(t, c, b, "b", 8) // evicts "a" while the request's handle lives
	assert.Equal(t, m.Bytes(), outlivedBytes(e.tr), "the request's handle outlived its request")
	free(t, m)
	assert.Zero(t, outlivedBytes(e.tr))
}

// TestCacheCloseHandsBack: Close lets go of every mask, as evictions do.
func TestCacheCloseHandsBack(t *testing.T) {
	e := newEnv(t)
	b := e.builder(t)
	c, err := NewCache()
	require.NoError(t, err)
	var held []*tensor.Tensor
	var want int64
	for i := range 64 {
		ctx, end := track.WithRequest(context.Background())
		m, err := b.Padding(ctx, []int{1}, 8+i)
		require.NoError(t, err)
		require.NoError(t, c.Put(string(rune('a'+i)), m))
		end()
		held = append(held, m)
		want += m.Bytes()
	}
	assert.Zero(t, outlivedBytes(e.tr))
	require.NoError(t, c.Close())
	assert.Equal(t, want, outlivedBytes(e.tr), "after Close the leaked handles count as outlived")
	for _, m := range held {
		free(t, m)
	}
}

// TestDroppedCacheIsFound guards that an owner never keeps itself alive
// through what it owns: a Cache dropped without Close is collected, and
// every mask only it held is reported dropped at the cache's line.
func TestDroppedCacheIsFound(t *testing.T) {
	for _, reclaim := range []bool{true, false} {
		t.Run(map[bool]string{true: "reclaim", false: "keep"}[reclaim], func(t *testing.T) {
			reports := make(chan track.LeakReport, 200)
			tr, err := track.New(track.ReclaimLeaks(reclaim), track.OnLeak(func(l track.LeakReport) { reports <- l }))
			require.NoError(t, err)
			host, err := tensor.NewHostDevice(64 << 20)
			require.NoError(t, err)
			alloc, err := tensor.NewDeviceAllocator(host, tr)
			require.NoError(t, err)
			b, err := NewBuilder(alloc)
			require.NoError(t, err)
			fill := func() {
				c, err := NewCache()
				require.NoError(t, err)
				for i := range 100 {
					m, err := b.Padding(context.Background(), []int{1}, 8+i)
					require.NoError(t, err)
					require.NoError(t, c.Put(string(rune(0x100+i)), m))
					require.NoError(t, m.Free())
				}
			}
			fill() // the cache is dropped here, without Close
			found := collectReports(t, reports, 100)
			for _, l := range found {
				assert.Equal(t, CacheOwner, l.Holder.How, "reported at the cache's own handle")
			}
			assert.Equal(t, int64(100), tr.Totals().GCLeaks)
			if reclaim {
				assert.Zero(t, tr.Totals().LiveCount, "reclaimed")
			}
		})
	}
}

// collectReports collects until n leak reports have arrived, and returns
// them. Each round is a collection and a wait for the finalizers it queued
// (collect), so the reports are waited on the runtime, not on a clock; the
// bound of rounds only turns missing reports into a failure.
func collectReports(t *testing.T, reports <-chan track.LeakReport, n int) []track.LeakReport {
	t.Helper()
	var got []track.LeakReport
	for round := 0; len(got) < n && round < 10; round++ {
		collect()
	drain:
		for len(got) < n {
			select {
			case l := <-reports:
				got = append(got, l)
			default:
				break drain
			}
		}
	}
	require.Len(t, got, n, "dropped handles reported")
	return got
}

type sentinel struct{ done chan struct{} }

// collect runs a garbage collection and waits until the finalizer goroutine
// has run the finalizer of a sentinel that collection found: the
// finalizers queued before it have run by then (one goroutine runs them in
// turn).
//
//go:noinline
func collect() {
	done := make(chan struct{})
	s := &sentinel{done: done}
	runtime.SetFinalizer(s, func(s *sentinel) { close(s.done) })
	s = nil // drop the only reference before collecting
	runtime.GC()
	<-done
}
