package track_test

import (
	"context"
	"testing"

	"github.com/tensorlife/tensorlife/track"
)

//go:noinline
func descendOther(n int, leaf func()) {
	if n == 0 {
		leaf()
		return
	}
	descendOther(n-1, leaf)
}

// BenchmarkWatcherTick is the cost of one window end over 100 sites, as an
// EveryTicks(1) watcher pays it once per request.
func BenchmarkWatcherTick(b *testing.B) {
	tr, err := track.New()
	if err != nil {
		b.Fatal(err)
	}
	const sites = 100
	for i := range sites {
		descend(i/10, func() {
			descendOther(i%10, func() {
				r := &track.Record{Bytes: 256, Meta: track.InternMeta("mask", "host", "", nil)}
				if err := tr.Record(context.Background(), r, 0); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
	if got := tr.Totals().Sites; got != sites {
		b.Fatalf("made %d sites, want %d", got, sites)
	}
	w, err := track.NewWatcher(tr)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Tick(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/sites, "ns/site")
}
