package track

import (
	"context"
	"testing"
	"time"

	"github.com/tensorlife/tensorlife/internal/benchratio"
)

// stepA and stepB spell out the low n bits of bits as a chain of calls,
// so that each number below 1<<n records from a call stack of its own.
//
//go:noinline
func stepA(bits, n int, leaf func()) { stepTo(bits>>1, n-1, leaf) }

//go:noinline
func stepB(bits, n int, leaf func()) { stepTo(bits>>1, n-1, leaf) }

func stepTo(bits, n int, leaf func()) {
	switch {
	case n == 0:
		leaf()
	case bits&1 == 0:
		stepA(bits, n, leaf)
	default:
		stepB(bits, n, leaf)
	}
}

// feedBench is a feed of a tracker of n sites, each holding one record
// made under no request (outlived from birth), and the sites.
func feedBench(b *testing.B, n int) (*siteFeed, []*Site) {
	tr, err := New(MaxSites(2 * n))
	if err != nil {
		b.Fatal(err)
	}
	sites := make([]*Site, n)
	for i := range sites {
		stepTo(i, 14, func() {
			r := &Record{Bytes: 64, Meta: InternMeta("weights", "host", "", nil)}
			if err := tr.Books().Record(context.Background(), r, 0); err != nil {
				b.Fatal(err)
			}
			sites[i] = r.Site()
		})
	}
	f := tr.siteFeedOf()
	b.Cleanup(f.close)
	f.changed(nil)
	return f, sites
}

// BenchmarkWindowEnd times SiteFeed.Changed, what a watcher's window end
// reads, when every one of 10k sites changed in the window, per site that
// changed ("ns/changed-site", goal: under 100), against the same window
// end when 100 of 10k sites changed, per site too (x-10k-changed: near 1,
// the cost is O(sites that changed)). Sites are marked changed between
// windows, off the clock, and the caches emptied after, as a window's
// changes made elsewhere leave them.
func BenchmarkWindowEnd(b *testing.B) {
	f, sites := feedBench(b, 10_000)
	dst := make([]SiteStats, 0, len(sites))
	// A window's changes are made over the window by other goroutines:
	// its end finds the sites out of its cache. Reading a buffer larger
	// than the caches between the changes and the end stands for that.
	evict := make([]int64, 64<<20/8)
	var sink int64
	window := func(n int) time.Duration {
		for _, s := range sites[:n] {
			s.outlived(0, 0)
		}
		for i := 0; i < len(evict); i += 8 {
			sink += evict[i]
		}
		start := time.Now()
		dst = f.changed(dst[:0])
		d := time.Since(start)
		if len(dst) != n {
			b.Fatalf("%d sites changed, want %d", len(dst), n)
		}
		return d / time.Duration(n)
	}
	var all, few []time.Duration
	for i := range max(b.N/1000, 1) {
		if i%2 == 0 {
			all = append(all, window(len(sites)))
			few = append(few, window(100))
		} else {
			few = append(few, window(100))
			all = append(all, window(len(sites)))
		}
	}
	_ = sink
	ratio, err := benchratio.MedianRatio(all, few)
	if err != nil {
		return
	}
	b.ReportMetric(ratio, "x-10k-changed")
	b.ReportMetric(float64(medianDuration(all).Nanoseconds()), "ns/changed-site")
}

func medianDuration(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := range s { // insertion sort: a few hundred rounds
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}
