package track

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walkedHeldBy is what HeldBy answered when it walked the live set: per
// site, the live handles of the first extra owner of each record whose own
// handle is gone, summed by holder, most first.
func walkedHeldBy(tr *Tracker, sites []*Site) [][]Holder {
	type key struct {
		site *Site
		how  string
	}
	out := make([][]Holder, len(sites))
	for i, s := range sites {
		counts := map[key]int{}
		for _, a := range tr.Snapshot().Allocations {
			if a.Site != s {
				continue
			}
			if h, ok := heldByOf(a.Holders); ok {
				counts[key{h.Site, h.How}] += h.Live
			}
		}
		hs := []Holder{}
		for k, n := range counts {
			hs = append(hs, Holder{Site: k.site, How: k.how, Live: n})
		}
		slices.SortFunc(hs, func(a, b Holder) int {
			return cmp.Or(cmp.Compare(b.Live, a.Live), strings.Compare(a.How, b.How), cmp.Compare(siteID(a.Site), siteID(b.Site)))
		})
		out[i] = hs
	}
	return out
}

// HeldBy reads counters kept as handles come and go; at every step they
// agree with a walk of the live set, and nothing is left once the records
// are released.
func TestHeldByCountersAgreeWithTheWalk(t *testing.T) {
	tr, err := New(OnLeak(func(LeakReport) {}), ReclaimLeaks(false))
	require.NoError(t, err)
	recs := leaves(t, tr, 3)
	r1, r2, r3 := recs[0], recs[1], recs[2]
	site := r1.site
	require.Same(t, site, r3.site)
	view, retain := tr.Books().Caller(0, 1), tr.Books().Caller(0, 2)
	sites := []*Site{site, view}
	check := func(step string) {
		t.Helper()
		assert.Equal(t, walkedHeldBy(tr, sites), tr.Books().HeldBy(sites, 100), step)
	}
	check("own handles only")
	r1.Hold(view, "View")
	r1.Hold(view, "View")
	check("two views beside the own handle")
	r1.Unhold(nil, "")
	check("own handle freed: two views hold it")
	r2.Hold(retain, "Retain")
	r2.Unhold(nil, "")
	check("a retain holds the second")
	r1.Unhold(view, "View")
	check("one view left")
	r3.Hold(view, "View")
	r3.ReportDropped(nil, "")
	check("own handle dropped while a view holds it")
	r3.markDropped(view, "View")
	check("the view dropped too")
	pcs := view.pcs
	many := leaves(t, tr, maxSiteHolders+3)
	for i, r := range many {
		r.Hold(tr.Books().Intern([]uintptr{pcs[0] + uintptr(i+1)}), "Retain")
		r.Unhold(nil, "")
	}
	sites = append(sites, many[0].site)
	held := tr.Books().HeldBy(sites, 100)[2]
	require.Len(t, held, maxSiteHolders+1, "the site's bound, and the handles past it together")
	var total int
	for _, h := range held {
		total += h.Live
	}
	assert.Equal(t, maxSiteHolders+3, total, "every handle counted, past the bound too")
	assert.Equal(t, Holder{How: otherHandles, Live: 3}, held[0], "the handles past the bound, most first")
	assert.Len(t, tr.Books().HeldBy(sites, 2)[2], 2, "at most the limit asked")

	for _, a := range tr.Snapshot().Allocations {
		r := findRecord(tr, a.ID)
		require.NotNil(t, r)
		require.NoError(t, r.Release())
	}
	assert.Equal(t, [][]Holder{{}, {}, {}}, tr.Books().HeldBy(sites, 100), "released records hold nothing")
}

// leaves records n tensors at one line.
func leaves(t *testing.T, tr *Tracker, n int) []*Record {
	out := make([]*Record, n)
	for i := range out {
		out[i] = captureLeaf(t, tr)
	}
	return out
}

// findRecord returns t's live record of id, nil if none.
func findRecord(t *Tracker, id uint64) *Record {
	sh := &t.shards[id%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for r := sh.head; r != nil; r = r.next {
		if r.id == id {
			return r
		}
	}
	return nil
}

// Goroutines that hold, free and release records of one site while
// another reads HeldBy and the counted snapshot leave the counters at
// nothing once every record is released: each record's share is taken
// back exactly once, whatever the interleaving.
func TestHeldByCountersUnderConcurrentHolders(t *testing.T) {
	tr, err := New()
	require.NoError(t, err)
	view := tr.Books().Caller(0, 1)
	const workers, each = 4, 200
	recs := make([][]*Record, workers)
	for w := range recs {
		recs[w] = leaves(t, tr, each)
	}
	site := recs[0][0].site
	done := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, hs := range tr.Books().HeldBy([]*Site{site}, 4) {
				for _, h := range hs {
					assert.Positive(t, h.Live)
				}
			}
			_, err := tr.SnapshotOf(Filter{LabelKeys: []string{}})
			assert.NoError(t, err)
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for _, r := range recs[w] {
				r.Hold(view, "View")
				r.Unhold(nil, "")
				r.Hold(view, "Retain")
				r.Unhold(view, "View")
				r.Unhold(view, "Retain")
				assert.NoError(t, r.Release())
			}
		})
	}
	wg.Wait()
	close(done)
	<-read
	assert.Equal(t, [][]Holder{{}}, tr.Books().HeldBy([]*Site{site}, 4))
	st := site.Stats()
	assert.Zero(t, st.LiveCount)
	assert.Zero(t, st.LiveBytes)
	assert.Equal(t, int64(workers*each), st.AllocCount)
}
