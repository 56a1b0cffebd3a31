package pprofexport_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

// discard is a ResponseWriter that keeps nothing of the body, as a socket
// keeps nothing of what is sent: what a serve allocates is then the
// handler's alone.
type discard struct {
	header http.Header
	code   int
	bytes  int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) WriteHeader(code int)        { d.code = code }
func (d *discard) Write(p []byte) (int, error) { d.bytes += len(p); return len(p), nil }

// serveAllocated serves one profile from h and returns the bytes it
// allocated (runtime.MemStats.TotalAlloc) and the body's size.
func serveAllocated(tb testing.TB, h http.Handler, path string) (allocated uint64, body int) {
	tb.Helper()
	runtime.GC() // what came before is not counted, nor collected on the clock
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if b, ok := tb.(*testing.B); ok {
		b.StartTimer()
		defer b.StopTimer()
	}
	w := &discard{header: http.Header{}}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	runtime.ReadMemStats(&after)
	if w.code != http.StatusOK {
		tb.Fatalf("status %d", w.code)
	}
	return after.TotalAlloc - before.TotalAlloc, w.bytes
}

// labelledWithModel is uniquelyLabelled with a second label on every
// tensor, one the profile does not show ("model"="llama").
func labelledWithModel(tb testing.TB, n int) *track.Tracker {
	tb.Helper()
	tr, err := track.New(track.Name("labelled"))
	if err != nil {
		tb.Fatal(err)
	}
	recs := make([]track.Record, n)
	meta := track.InternMeta("activation", "host", "float16", []int{64})
	for i := range recs {
		ctx := track.WithLabels(context.Background(), "request", fmt.Sprintf("req-%08d", i), "model", "llama")
		recs[i].Bytes, recs[i].Meta = 128, meta
		if err := tr.Books().Record(ctx, &recs[i], 0); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(func() {
		for i := range recs {
			if err := (&recs[i]).Release(); err != nil {
				tb.Error(err)
			}
		}
	})
	return tr
}

// BenchmarkLabelKeysProfile serves, through the handler, the profile by a
// label key that every tensor holds a value of its own of
// (LabelKeys("request")): 200k and 1M groups, one per request, all read
// from the live set. It reports the MiB one serve allocates (goal: at most
// 64 at 200k, 256 at 1M) and per thousand groups written; ns/op (and
// s/op) is one serve's time, a collection before each kept off the clock
// (goal at 1M: 2 s). With "+model", each tensor also holds a label the profile does not
// show, so each group carries a label set of its own, of the shown key.
func BenchmarkLabelKeysProfile(b *testing.B) {
	for _, bc := range []struct {
		n     int
		model bool
	}{{200_000, false}, {1_000_000, false}, {200_000, true}} {
		n := bc.n
		name := fmt.Sprintf("%dk-requests", n/1000)
		if bc.model {
			name += "+model"
		}
		b.Run(name, func(b *testing.B) {
			var tr *track.Tracker
			if bc.model {
				tr = labelledWithModel(b, n)
			} else {
				tr = uniquelyLabelled(b, n)
			}
			h, err := pprofexport.NewHandler(tr, pprofexport.LabelKeys("request"))
			if err != nil {
				b.Fatal(err)
			}
			var total uint64
			b.StopTimer() // serveAllocated times the serve alone
			for range b.N {
				allocated, _ := serveAllocated(b, h, tensorsPath)
				total += allocated
			}
			mib := float64(total) / float64(b.N) / (1 << 20)
			b.ReportMetric(mib, "MiB/op")
			b.ReportMetric(mib*1000/float64(n), "MiB/1k-groups")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/op") // the serves alone, as ns/op
		})
	}
}
