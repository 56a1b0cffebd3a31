package pprofexport_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tensorlife/tensorlife/internal/benchratio"
	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
	"github.com/tensorlife/tensorlife/track/trackalloc"
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

// scrapeTracker records live tensors from 10,000 sites, perSite at each,
// and returns a handler over them.
func scrapeTracker(b *testing.B, perSite int) http.Handler {
	tr, err := track.New(track.MaxSites(1 << 14))
	if err != nil {
		b.Fatal(err)
	}
	meta := track.InternMeta("activation", "host", "float16", []int{64})
	for i := range 10_000 {
		chain(i, 14, func() {
			recs := make([]track.Record, perSite)
			for j := range recs {
				recs[j].Bytes, recs[j].Meta = 128, meta
				if err := trackalloc.Record(context.Background(), tr, &recs[j], 0); err != nil {
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
// live tensors on 10k sites against the same profile of 10k live tensors
// on the same number of sites: the default profile is read from counters,
// so the ratio stays near 1 however many tensors are live.
func BenchmarkScrapeCostIsFlatInLiveTensors(b *testing.B) {
	many, few := scrapeTracker(b, 100), scrapeTracker(b, 1)
	scrape := func(h http.Handler) func() {
		return func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/tensors", nil))
			if rec.Code != http.StatusOK {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	}
	benchratio.Run(b, "1M-live", scrape(many), scrape(few), benchratio.BaselineName("10k-live"),
		benchratio.RoundOps(2))
}
