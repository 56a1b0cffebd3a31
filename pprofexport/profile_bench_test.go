package pprofexport_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"

	"github.com/tensorlife/tensorlife/pprofexport"
	"github.com/tensorlife/tensorlife/track"
)

// benchSites is how many distinct call sites the benchmarks spread tensors
// over: 1,000 of the 1<<benchDepth paths of recordAt.
const (
	benchSites = 1000
	benchDepth = 10
)

// benchLive is a tracker holding tensors live tensors from benchSites
// sites, without labels, and a snapshot of it.
type benchLive struct {
	tracker *track.Tracker
	recs    []track.Record
	snap    *track.Snapshot
}

var (
	benchMu    sync.Mutex
	benchCache = map[int]*benchLive{}
)

// liveTensors builds the tracker for a tensor count once per process: a
// million records take a second and about 150 MB, so -count runs share it.
// Records are recorded with track directly: a million real tensors would
// measure the host device, not the profile.
func liveTensors(b *testing.B, tensors int) *benchLive {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if l := benchCache[tensors]; l != nil {
		return l
	}
	tr, err := track.New(track.Name("bench"), track.MaxSites(2*benchSites))
	if err != nil {
		b.Fatal(err)
	}
	shape := []int{256}
	recs := make([]track.Record, tensors)
	for i := range recs {
		recs[i] = track.Record{Bytes: 1024, Meta: track.InternMeta("tensor", "cuda:0", "float32", shape)}
	}
	per := tensors / benchSites
	for site := range benchSites {
		if err := recordAt(context.Background(), tr, recs[site*per:(site+1)*per], uint(site), benchDepth); err != nil {
			b.Fatal(err)
		}
	}
	snap, err := tr.SnapshotOf(track.Filter{})
	if err != nil {
		b.Fatal(err)
	}
	if got := len(snap.Groups); got != benchSites {
		b.Fatalf("%d groups, want one per site (%d)", got, benchSites)
	}
	l := &benchLive{tracker: tr, recs: recs, snap: snap}
	benchCache[tensors] = l
	return l
}

// settle collects the garbage left by building a fixture, so that a timed
// loop does not pay for it.
func settle(b *testing.B) {
	b.Helper()
	runtime.GC()
	b.ResetTimer()
}

var benchTensorCounts = []int{10_000, 1_000_000}

// BenchmarkWriteProfile times Write of a prepared snapshot of 1,000 sites.
// The goal: the 1,000,000-tensor case within 1.5x of the 10,000 one (cost
// grows with sites, not tensors), and well under 50 ms per profile.
func BenchmarkWriteProfile(b *testing.B) {
	for _, n := range benchTensorCounts {
		b.Run(fmt.Sprintf("sites=%d/tensors=%d", benchSites, n), func(b *testing.B) {
			l := liveTensors(b, n)
			// The first profile of a site symbolizes it (once per site, for
			// the tracker's life); time the steady state.
			if err := pprofexport.Write(io.Discard, l.snap); err != nil {
				b.Fatal(err)
			}
			var size countingWriter
			b.ReportAllocs()
			settle(b)
			for b.Loop() {
				size = 0
				if err := pprofexport.Write(&size, l.snap); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchSites, "ns/site")
			b.ReportMetric(float64(size), "profile_bytes")
		})
	}
}

// BenchmarkProfile times building the profile without encoding it.
func BenchmarkProfile(b *testing.B) {
	for _, n := range benchTensorCounts {
		b.Run(fmt.Sprintf("sites=%d/tensors=%d", benchSites, n), func(b *testing.B) {
			l := liveTensors(b, n)
			if _, err := pprofexport.Profile(l.snap); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			settle(b)
			for b.Loop() {
				if _, err := pprofexport.Profile(l.snap); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSnapshot times what a handler does before Write: taking the
// snapshot, which walks every live tensor and so grows with them by nature.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range benchTensorCounts {
		b.Run(fmt.Sprintf("sites=%d/tensors=%d", benchSites, n), func(b *testing.B) {
			l := liveTensors(b, n)
			b.ReportAllocs()
			settle(b)
			for b.Loop() {
				if _, err := l.tracker.SnapshotOf(track.Filter{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/tensor")
		})
	}
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
