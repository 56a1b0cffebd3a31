package pool

import (
	"math"
	"math/bits"
	"sync"

	"github.com/tensorlife/tensorlife/track"
)

// What the pool's admitted requests of each kind held at their largest,
// in the pool's own rounded bytes: each admission counts the blocks handed
// out under its context (drawn from its reservation or past it) and keeps
// its peak, and when it ends the peak joins its kind's histogram here.
// The tracker's peaks (track.Tracker.RequestPeak) count the bytes asked
// for; a request of many small tensors is rounded up tensor by tensor,
// which no figure of the sum can say, so once a kind has AdmitHistory
// admitted requests behind it on this pool, Admit reserves their p99.

// admitPeaks is a pool's table of admitted requests' peaks by kind,
// bounded to track.MaxRequestKinds kinds (later ones are not kept: they
// reserve by the tracker's figures). Its lock is taken once when a request
// is admitted and once when it ends.
type admitPeaks struct {
	mu     sync.Mutex
	byKind map[string]*peakHist
}

// peakHist is a log-scale histogram of peaks: 8 buckets a power of two,
// each keeping its count and the largest value it saw, as the tracker's.
type peakHist struct {
	counts [peakBuckets]int64
	maxes  [peakBuckets]int64
	n      int64
}

const (
	peakSub     = 8
	peakBuckets = peakSub * 64
)

func peakBucket(v int64) int {
	if v < peakSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1 // 3..62
	return (e-2)*peakSub + int(v>>(e-3)) - peakSub
}

func (h *peakHist) add(v int64) {
	i := peakBucket(v)
	h.counts[i]++
	h.maxes[i] = max(h.maxes[i], v)
	h.n++
}

// p99 returns the largest value in the bucket holding the 99th percentile.
func (h *peakHist) p99() int64 {
	rank := max(int64(math.Ceil(0.99*float64(h.n))), 1)
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return h.maxes[i]
		}
	}
	return 0
}

// ended adds the peak of an admission of kind that has ended.
func (t *admitPeaks) ended(kind string, peak int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.byKind[kind]
	if h == nil {
		if len(t.byKind) >= track.MaxRequestKinds {
			return
		}
		if t.byKind == nil {
			t.byKind = make(map[string]*peakHist)
		}
		h = &peakHist{}
		t.byKind[kind] = h
	}
	h.add(peak)
}

// peak returns kind's p99 peak and how many admitted requests it is of.
func (t *admitPeaks) peak(kind string) (p99, requests int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.byKind[kind]
	if h == nil {
		return 0, 0
	}
	return h.p99(), h.n
}
