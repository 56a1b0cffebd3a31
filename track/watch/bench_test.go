package watch_test

import (
	"context"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// viaA and viaB spell out the low n bits of bits as a chain of calls, so
// that each number below 1<<n is a distinct call stack of n frames.
//
//go:noinline
func viaA(bits, n int, leaf func()) { via(bits>>1, n-1, leaf) }

//go:noinline
func viaB(bits, n int, leaf func()) { via(bits>>1, n-1, leaf) }

func via(bits, n int, leaf func()) {
	switch {
	case n == 0:
		leaf()
	case bits&1 == 0:
		viaA(bits, n, leaf)
	default:
		viaB(bits, n, leaf)
	}
}

// tickBench is a tracker with sites distinct call sites holding one outlived
// tensor each, a watcher of it, and a request that keeps one tensor at one
// more site and frees it the request after: each window, one site changes.
type tickBench struct {
	tr   *track.Tracker
	w    *watch.Watcher
	prev *track.Record
}

func newTickBench(b *testing.B, sites int) *tickBench {
	tr, err := track.New(track.MaxSites(2 * sites))
	if err != nil {
		b.Fatal(err)
	}
	for i := range sites {
		via(i, 14, func() {
			r := &track.Record{Bytes: 256, Meta: track.InternMeta("weights", "host", "", nil)}
			if err := tr.Record(context.Background(), r, 0); err != nil {
				b.Fatal(err)
			}
		})
	}
	if got := tr.Totals().Sites; got != sites {
		b.Fatalf("made %d sites, want %d", got, sites)
	}
	w, err := watch.New(tr)
	if err != nil {
		b.Fatal(err)
	}
	return &tickBench{tr: tr, w: w}
}

func (tb *tickBench) request(b *testing.B) {
	ctx, end := track.WithRequest(context.Background())
	r := &track.Record{Bytes: 256, Meta: track.InternMeta("mask", "host", "", nil)}
	if err := tb.tr.Record(ctx, r, 0); err != nil {
		b.Fatal(err)
	}
	end()
	if tb.prev != nil {
		if err := tb.tr.Release(tb.prev); err != nil {
			b.Fatal(err)
		}
	}
	tb.prev = r
	if err := tb.w.Tick(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTickCostIsFlatInSites is a request and its window end on a
// tracker of 10,000 sites against the same on one of 100 sites: a window end
// reads the sites that changed, so the ratio stays near 1.
func BenchmarkTickCostIsFlatInSites(b *testing.B) {
	many, few := newTickBench(b, 10_000), newTickBench(b, 100)
	benchratio.Run(b, "10k-sites", func() { many.request(b) }, func() { few.request(b) },
		benchratio.BaselineName("100-sites"))
}

// BenchmarkNewOnManySites is watch.New on a tracker of 16,384 sites that
// allocated and hold nothing outlived, against watch.New on a tracker of
// one such site, in the same rounds: the difference of the bytes each
// retains, per site, is reported. A watcher keeps nothing for such sites:
// 0.007 B a site here, where New kept a history of every site before
// (393 B a site, measured with this benchmark on that code).
func BenchmarkNewOnManySites(b *testing.B) {
	b.ReportAllocs()
	const sites = 1 << 14
	many, err := track.New(track.MaxSites(2 * sites))
	if err != nil {
		b.Fatal(err)
	}
	viaSites(b, many, 14, sites)
	few, err := track.New()
	if err != nil {
		b.Fatal(err)
	}
	viaSites(b, few, 14, 1)
	var kept *watch.Watcher
	measure := func(tr *track.Tracker) uint64 {
		before := heapAfter(func() {})
		after := heapAfter(func() {
			if kept, err = watch.New(tr, watch.OnSuspect(func(watch.Suspect) {})); err != nil {
				b.Fatal(err)
			}
		})
		return max(after, before) - before
	}
	var manyBytes, fewBytes uint64
	for b.Loop() {
		manyBytes, fewBytes = measure(many), measure(few)
	}
	_ = kept
	b.ReportMetric(float64(int64(manyBytes)-int64(fewBytes))/sites, "retained-B/site")
}
