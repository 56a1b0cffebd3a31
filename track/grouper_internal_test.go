package track

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/grouping"
)

// TestSortedGroupsTieOnTheirValuesAsInFull guards the sort's shortcuts,
// its classes' ranks and, for groups told apart by one label key, the
// bytes of their values: over values that share prefixes, run past eight
// bytes, end in zero bytes or are empty, one made last that shares none, over groups with no such label,
// over sites and sizes that differ, over two Metas alike in content, and
// over more classes than it ranks, the order is the one comparing every
// group whole gives.
func TestSortedGroupsTieOnTheirValuesAsInFull(t *testing.T) {
	sites := []*Site{{id: 1}, {id: 2}}
	metas := []*Meta{InternMeta("a", "host", "f16", []int{4}), InternMeta("b", "host", "f16", []int{4}),
		{Kind: "a", Device: "host", DType: "f16", Shape: []int{4}}} // the first's content, not interned
	alphabet := []string{"", "\x00", "a", "b", "req-0000", "req-00001", "req-000012345", "req-0000123456789"}
	for _, tt := range []struct {
		name    string
		keys    []string
		shapes  int // the Metas are the first, second and third, and so many more
		records int
		ranked  bool
	}{
		{"ranked, by one key", []string{"request"}, 0, 5000, true},
		{"ranked, by two keys", []string{"request", "model"}, 0, 5000, true},
		{"past the classes it ranks", []string{"request"}, 3 * grouping.MinSortClasses, 20000, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			gr := newGrouper(Filter{LabelKeys: tt.keys})
			metas := slices.Clone(metas)
			for i := range tt.shapes {
				// Not interned: the process's table of Metas is bounded.
				metas = append(metas, &Meta{Kind: "c", Device: "host", DType: "f16", Shape: []int{i}})
			}
			for range tt.records {
				v := alphabet[rng.IntN(len(alphabet))] + alphabet[rng.IntN(len(alphabet))]
				labels := NewLabels("request", v, "model", alphabet[rng.IntN(3)])
				if rng.IntN(10) == 0 {
					labels = NewLabels("model", "m") // no value of the key
				}
				gr.add(sites[rng.IntN(2)], metas[rng.IntN(len(metas))], labels, nil, int64(rng.IntN(3)+1)*64,
					false, rng.IntN(4) == 0, time.Time{})
			}
			// A value made last that shares no prefix with the others.
			gr.add(sites[0], metas[0], NewLabels("request", "\xff"+alphabet[4], "model", "m"), nil, 64, false, false,
				time.Time{})
			n := gr.groups.Len()
			require.Greater(t, n, 50)
			classes := map[sortClass]bool{}
			for i := range n {
				classes[gr.at(int32(i)).Class()] = true
			}
			// The sort ranks classes up to the larger of MinSortClasses and
			// an eighth of the entries, and compares entries whole past it.
			assert.Equal(t, tt.ranked, len(classes) <= max(grouping.MinSortClasses, n/8), "%d classes", len(classes))
			got := gr.sorted()
			want := make([]int32, n)
			for i := range want {
				want[i] = int32(i)
			}
			slices.SortFunc(want, func(a, b int32) int { return entryOrder(gr.at(a), gr.at(b)) })
			for i := range want {
				require.Zero(t, entryOrder(gr.at(got[i].At), gr.at(want[i])), "position %d", i)
			}
			assert.True(t, slices.IsSortedFunc(got, func(a, b grouping.Key) int { return entryOrder(gr.at(a.At), gr.at(b.At)) }))
		})
	}
}

// TestGroupsByKeysHashAsTheirLabels guards the hash of a group told apart
// by label keys: labels that agree on the keys hash alike, whether they
// hold those keys alone (their own hash) or more (a hash of the keys').
func TestGroupsByKeysHashAsTheirLabels(t *testing.T) {
	gr := newGrouper(Filter{LabelKeys: []string{"request", "route"}})
	alone := NewLabels("request", "r1")
	assert.Equal(t, gr.labelHash(alone), gr.labelHash(NewLabels("request", "r1", "model", "m")))
	assert.Equal(t, gr.labelHash(NewLabels("request", "r1", "route", "/a")),
		gr.labelHash(NewLabels("model", "m", "route", "/a", "request", "r1")))
	assert.NotEqual(t, gr.labelHash(alone), gr.labelHash(NewLabels("request", "r2", "model", "m")))
	assert.Zero(t, gr.labelHash(NewLabels("model", "m")), "no key of the grouper's: no labels")
	assert.Zero(t, gr.labelHash(Labels{}))
}

// TestSortedTiesAreReadAgainWhenThePrefixShrinks guards the ties read past
// the prefix shared so far: request ids that share a long prefix, in no
// order, then one that shares none, sort as comparing them whole sorts
// them.
func TestSortedTiesAreReadAgainWhenThePrefixShrinks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	site, meta := &Site{id: 1}, InternMeta("a", "host", "f16", []int{4})
	gr := newGrouper(Filter{LabelKeys: []string{"request"}})
	for _, i := range rng.Perm(3000) {
		gr.add(site, meta, NewLabels("request", fmt.Sprintf("request-%05d", i)), nil, 64, false, false, time.Time{})
	}
	gr.add(site, meta, NewLabels("request", "a"), nil, 64, false, false, time.Time{}) // first: against stale ties, last
	got := gr.sorted()
	for i := 1; i < len(got); i++ {
		require.Negative(t, entryOrder(gr.at(got[i-1].At), gr.at(got[i].At)), "position %d", i)
	}
	assert.Equal(t, "{request=a}", gr.at(got[0].At).labels.String())
}
