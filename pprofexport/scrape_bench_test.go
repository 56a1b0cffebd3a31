package pprofexport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

// chainA and chainB spell out the low n bits of bits as a chain of calls,
// so that each number below 1<<n is a call stack of its own.
//
//go:noinline
func chainA(bits, n int, leaf func()) { chain(bits>>1, n-1, leaf) }

//go:noinline
func chainB(bits, n int, leaf func()) { chain(bits>>1, n-1, leaf) }

func chain(bits, n int, leaf func()) {
	switch {
	case n == 0:
		leaf()
	case bits&1 == 0:
		chainA(bits, n, leaf)
	default:
		chainB(bits, n, leaf)
	}
}

// scrapeTracker records live tensors from sites call sites, perSite at
// each, cycling through shapes shapes at every site, and returns a handler
// over them.
func scrapeTracker(b *testing.B, sites, perSite, shapes int) http.Handler {
	tr, err := track.New(track.MaxSites(1 << 14))
	if err != nil {
		b.Fatal(err)
	}
	metas := make([]*track.Meta, shapes)
	for i := range metas {
		metas[i] = track.InternMeta("activation", "host", "float16", []int{i + 1, 64})
	}
	for i := range sites {
		chain(i, 14, func() {
			recs := make([]track.Record, perSite)
			for j := range recs {
				k := j % shapes
				recs[j].Bytes, recs[j].Meta = int64(k+1)*128, metas[k]
				if err := tr.Books().Record(context.Background(), &recs[j], 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	h, err := pprofexport.NewHandler(tr)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkScrapeCostIsFlatInLiveTensors serves the default profile of 1M
// live tensors against the same profile of 10k live tensors on the same
// sites: the default profile is read from counters, so the ratio stays
// near 1 however many tensors are live (goal: at most 1.5).
//
//   - few-shapes: 10k sites, one shape each;
//   - 256-shapes-per-site: 39 sites, each cycling through 256 shapes (a KV
//     cache whose shape follows the sequence length), past the 64 a site
//     counts apart: the rest are counted in one other-shapes group.
func BenchmarkScrapeCostIsFlatInLiveTensors(b *testing.B) {
	scrape := func(h http.Handler) func() {
		return func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/tensors", nil))
			if rec.Code != http.StatusOK {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	}
	b.Run("few-shapes", func(b *testing.B) {
		many, few := scrapeTracker(b, 10_000, 100, 1), scrapeTracker(b, 10_000, 1, 1)
		benchratio.Run(b, "1M-live", scrape(many), scrape(few), benchratio.BaselineName("10k-live"),
			benchratio.RoundOps(2))
	})
	b.Run("256-shapes-per-site", func(b *testing.B) {
		const sites = 39 // 10k live tensors: 256 at each site, one of each shape
		many, few := scrapeTracker(b, sites, 1_000_000/sites, 256), scrapeTracker(b, sites, 10_000/sites, 256)
		benchratio.Run(b, "1M-live", scrape(many), scrape(few), benchratio.BaselineName("10k-live"),
			benchratio.RoundOps(2))
	})
}
