package watch_test

import (
	"context"
	"testing"

	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/watch"
)

// siteFlip is a tracker of 256 call sites, each holding one outlived
// tensor or two, and a watcher past its warm-up: flip(k) changes the
// outlived bytes of k sites, growing them one window and shrinking them
// the next, as a service's sites swing.
type siteFlip struct {
	tr    *track.Tracker
	w     *watch.Watcher
	ended context.Context // a request's context, done
	extra []*track.Record // per site: its second tensor while it holds one
	sites []func(func())  // per site: calls its argument from that site
	grown bool
}

func newSiteFlip(b *testing.B) *siteFlip {
	const sites = 256
	tr, err := track.New(track.MaxSites(2 * sites))
	if err != nil {
		b.Fatal(err)
	}
	ctx, end := track.WithRequest(context.Background())
	end()
	sf := &siteFlip{tr: tr, ended: ctx, extra: make([]*track.Record, sites)}
	for i := range sites {
		// The 8 bits that tell sites apart nearest the tensor, 40
		// frames deep: a site is the 32 frames nearest it, the same
		// from wherever the benchmark calls.
		sf.sites = append(sf.sites, func(f func()) { via(i<<32, 40, f) })
		sf.record(i)
	}
	if sf.w, err = watch.New(tr); err != nil {
		b.Fatal(err)
	}
	for range 8 { // past the warm-up, every site with a history
		sf.flip(b, sites)
		if err := sf.w.Tick(); err != nil {
			b.Fatal(err)
		}
	}
	return sf
}

// record records one outlived tensor at site i and returns it.
func (sf *siteFlip) record(i int) *track.Record {
	r := &track.Record{Bytes: 256, Meta: track.InternMeta("activations", "host", "", nil)}
	sf.sites[i](func() {
		if err := sf.tr.Books().Record(sf.ended, r, 0); err != nil {
			panic(err)
		}
	})
	return r
}

// flip grows the first k sites by a tensor, or shrinks them back.
func (sf *siteFlip) flip(b *testing.B, k int) {
	for i := range k {
		if sf.grown {
			if err := (sf.extra[i]).Release(); err != nil {
				b.Fatal(err)
			}
		} else {
			sf.extra[i] = sf.record(i)
		}
	}
	sf.grown = !sf.grown
}

// BenchmarkWindowPerChangedSite is a window end in which 64 of 256 sites
// changed, timed alone (the changes are made with the timer stopped), and
// reported per changed site ("ns/site").
func BenchmarkWindowPerChangedSite(b *testing.B) {
	const changed = 64
	sf := newSiteFlip(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		sf.flip(b, changed)
		b.StartTimer()
		if err := sf.w.Tick(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/changed, "ns/site")
}
