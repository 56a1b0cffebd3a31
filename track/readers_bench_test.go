package track_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// openFixture is a tracker with open requests, each begun by WithLabels on
// a cancellable context (the kind whose end only a reader can find) and
// holding one tensor, a watcher past its first window, and the kinds the
// requests are of.
type openFixture struct {
	tr *track.Tracker
	w  *watch.Watcher
}

func newOpenFixture(b *testing.B, open int) *openFixture {
	b.Helper()
	tr, err := track.New(track.RequestKinds("route"))
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]*track.Record, open)
	cancels := make([]context.CancelFunc, open)
	for i := range open {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		ctx = track.WithLabels(ctx, "route", fmt.Sprint("/r", i%32), "request", fmt.Sprint(i))
		recs[i] = &track.Record{Bytes: int64(64 + i%512), Meta: track.InternMeta("tensor", "host", "", nil)}
		if err := tr.Books().Record(ctx, recs[i], 0); err != nil {
			b.Fatal(err)
		}
	}
	// Some requests of each kind ended, so that RequestCosts has kinds.
	for i := range 64 {
		ctx, end := track.WithRequest(context.Background())
		r := &track.Record{Bytes: 4096, Meta: track.InternMeta("tensor", "host", "", nil)}
		if err := tr.Books().Record(track.WithLabels(ctx, "route", fmt.Sprint("/r", i%32)), r, 0); err != nil {
			b.Fatal(err)
		}
		if err := r.Release(); err != nil {
			b.Fatal(err)
		}
		end()
	}
	w, err := watch.New(tr)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Tick(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for i := range recs {
			cancels[i]()
			_ = recs[i].Release()
		}
	})
	return &openFixture{tr: tr, w: w}
}

// BenchmarkReadersFlatInOpenRequests times each reader of a tracker with
// 10k open requests against the same reader of one with 100 (and
// OpenRequests(5) at 100k against 100), in alternating rounds: a reader
// pays for what changed since it last read, never for what is open (goal:
// x-10k-open at most 1.5 for a window's end, Totals and RequestCosts; x-100k-open
// at most 2 for OpenRequests(5)). Nothing changes between the readings:
// the cost is that of the open requests alone. On a 2-core machine loaded
// to 6 runnable goroutines a core: window end 1.12-1.33x, Totals
// 1.10-1.13x, RequestCosts 1.0-1.3x, OpenRequests(5) 1.2-1.6x at 10k and
// 1.4-2.4x at 100k; Totals at 100k 4.2-4.6x (about 2 µs more: the sweep's
// 32 contexts out of every cache).
func BenchmarkReadersFlatInOpenRequests(b *testing.B) {
	few, many := newOpenFixture(b, 100), newOpenFixture(b, 10_000)
	readers := []struct {
		name string
		read func(f *openFixture)
	}{
		{"window-end", func(f *openFixture) {
			if err := f.w.Tick(); err != nil {
				b.Fatal(err)
			}
		}},
		{"totals", func(f *openFixture) { f.tr.Totals() }},
		{"request-costs", func(f *openFixture) { f.tr.RequestCosts() }},
		{"open-requests-5", func(f *openFixture) { f.tr.OpenRequests(5) }},
	}
	for _, r := range readers {
		b.Run(r.name, func(b *testing.B) {
			benchratio.Run(b, "10k-open", func() { r.read(many) }, func() { r.read(few) },
				benchratio.BaselineName("100-open"))
		})
	}
	huge := func() *openFixture { return newOpenFixture(b, 100_000) }
	b.Run("open-requests-5-100k", func(b *testing.B) {
		huge := huge()
		benchratio.Run(b, "100k-open", func() { huge.tr.OpenRequests(5) }, func() { few.tr.OpenRequests(5) },
			benchratio.BaselineName("100-open"))
	})
	// Past the caches the sweep's 32 looks at contexts are 32 misses:
	// constant in the open requests, but not free.
	b.Run("totals-100k", func(b *testing.B) {
		huge := huge()
		benchratio.Run(b, "100k-open", func() { huge.tr.Totals() }, func() { few.tr.Totals() },
			benchratio.BaselineName("100-open"))
	})
}
