package timeline_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"

	"github.com/tensorlife/tensorlife/timeline"
	"github.com/tensorlife/tensorlife/track"
)

// benchPairs allocations and frees make a history of a million events. The
// history has room to spare: ids do not split evenly over its 64 rings.
const benchPairs = 500_000

// benchTracker is built once for every benchmark of the run: recording a
// million events takes longer than writing them.
var benchTracker = sync.OnceValues(func() (*track.Tracker, error) {
	tr, err := track.New(track.KeepHistory(2*benchPairs+1<<12), track.Name("bench"))
	if err != nil {
		return nil, err
	}
	ctx := track.WithLabels(context.Background(), "model", "m1")
	// Each allocation is freed 100 allocations later, so every site holds
	// some memory and the picture has bands to draw.
	var held [100]*track.Record
	for i := range benchPairs + len(held) {
		slot := &held[i%len(held)]
		if *slot != nil {
			if err := (*slot).Release(); err != nil {
				return nil, err
			}
			*slot = nil
		}
		if i >= benchPairs {
			continue
		}
		r := &track.Record{Bytes: int64(256 * (1 + i%64)), Meta: track.InternMeta("tensor", "", "", nil)}
		if err := recordAt(tr, ctx, r, i%50); err != nil {
			return nil, err
		}
		*slot = r
	}
	return tr, nil
})

// recordAt records r from one of 50 sites: ten lines, each reached through
// five stack depths.
func recordAt(tr *track.Tracker, ctx context.Context, r *track.Record, site int) error {
	if depth := site / 10; depth > 0 {
		return recordAt(tr, ctx, r, site-10)
	}
	switch site % 10 {
	case 0:
		return tr.Books().Record(ctx, r, 0)
	case 1:
		return tr.Books().Record(ctx, r, 0)
	case 2:
		return tr.Books().Record(ctx, r, 0)
	case 3:
		return tr.Books().Record(ctx, r, 0)
	case 4:
		return tr.Books().Record(ctx, r, 0)
	case 5:
		return tr.Books().Record(ctx, r, 0)
	case 6:
		return tr.Books().Record(ctx, r, 0)
	case 7:
		return tr.Books().Record(ctx, r, 0)
	case 8:
		return tr.Books().Record(ctx, r, 0)
	default:
		return tr.Books().Record(ctx, r, 0)
	}
}

func benchTimeline(b *testing.B, opts ...timeline.Option) *timeline.Timeline {
	b.Helper()
	tr, err := benchTracker()
	if err != nil {
		b.Fatal(err)
	}
	tl, err := timeline.Build(tr, opts...)
	if err != nil {
		b.Fatal(err)
	}
	if tl.Events != 2*benchPairs || tl.Dropped != 0 {
		b.Fatalf("history of %d events, %d dropped; want %d, none", tl.Events, tl.Dropped, 2*benchPairs)
	}
	return tl
}

// countingWriter discards what it is given and counts it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// BenchmarkWriteTrace writes the trace of a million events: the figure to
// hold against PyTorch's 0.7 s for a snapshot of 100,000.
func BenchmarkWriteTrace(b *testing.B) {
	tl := benchTimeline(b)
	var w countingWriter
	b.ReportAllocs()
	for b.Loop() {
		if err := tl.WriteTrace(&w); err != nil {
			b.Fatal(err)
		}
	}
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp/float64(tl.Events), "ns/event")
	b.ReportMetric(perOp/1e6, "ms/trace")
	b.ReportMetric(float64(w.n)/float64(b.N)/float64(tl.Events), "bytes/event")
}

// BenchmarkWriteTraceEncodingJSON is the baseline: the same instants
// written with encoding/json, one event at a time.
func BenchmarkWriteTraceEncodingJSON(b *testing.B) {
	tr, err := benchTracker()
	if err != nil {
		b.Fatal(err)
	}
	log, err := tr.History()
	if err != nil {
		b.Fatal(err)
	}
	type args struct {
		ID     uint64            `json:"id"`
		Bytes  int64             `json:"bytes"`
		Site   string            `json:"site"`
		Kind   string            `json:"kind,omitempty"`
		Labels map[string]string `json:"labels,omitempty"`
	}
	type event struct {
		Name string  `json:"name"`
		Cat  string  `json:"cat"`
		Ph   string  `json:"ph"`
		TS   float64 `json:"ts"`
		PID  int     `json:"pid"`
		TID  int     `json:"tid"`
		S    string  `json:"s"`
		Args args    `json:"args"`
	}
	b.ReportAllocs()
	for b.Loop() {
		bw := bufio.NewWriter(io.Discard)
		enc := json.NewEncoder(bw)
		for i := range log.Events {
			e := &log.Events[i]
			if err := enc.Encode(event{Name: e.Kind.String(), Cat: "tensorlife", Ph: "i", TS: float64(e.Time) / 1e3,
				PID: 1, TID: 2, S: "t", Args: args{ID: e.ID, Bytes: e.Bytes, Site: e.Site.String(), Kind: e.AllocKind,
					Labels: labelMap(e.Labels)}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp/float64(len(log.Events)), "ns/event")
	b.ReportMetric(perOp/1e6, "ms/trace")
}

// BenchmarkBuild reads the history of a million events and rebuilds the
// series: the cost of asking for a picture.
func BenchmarkBuild(b *testing.B) {
	tr, err := benchTracker()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var events int
	for b.Loop() {
		tl, err := timeline.Build(tr)
		if err != nil {
			b.Fatal(err)
		}
		events = tl.Events
	}
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp/float64(events), "ns/event")
	b.ReportMetric(perOp/1e6, "ms/build")
}

// BenchmarkFromHistory is BenchmarkBuild without reading the tracker: the
// two walks over the window that rebuild the series.
func BenchmarkFromHistory(b *testing.B) {
	tr, err := benchTracker()
	if err != nil {
		b.Fatal(err)
	}
	log, err := tr.History()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := timeline.FromHistory(log, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(log.Events)), "ns/event")
}

// BenchmarkWriteSVG draws the picture of a million events at the default
// 1000 samples: its cost follows samples and series, not events.
func BenchmarkWriteSVG(b *testing.B) {
	tl := benchTimeline(b)
	var w countingWriter
	b.ReportAllocs()
	for b.Loop() {
		if err := tl.WriteSVG(&w); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(w.n)/float64(b.N), "bytes/svg")
}

// labelMap copies l into a map, as a JSON encoder of labels would.
func labelMap(l track.Labels) map[string]string {
	m := make(map[string]string, l.Len())
	l.Range(func(k, v string) bool { m[k] = v; return true })
	return m
}
