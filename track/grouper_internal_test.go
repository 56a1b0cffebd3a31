package track

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSortedGroupsTieOnTheirValuesAsInFull guards the sort's shortcut for
// groups told apart by one label key: over values that share prefixes,
// run past eight bytes, end in zero bytes or are empty, over groups with
// no such label, and over sites and sizes that differ, the order is the
// one comparing every group whole gives.
func TestSortedGroupsTieOnTheirValuesAsInFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sites := []*Site{{id: 1}, {id: 2}}
	metas := []*Meta{InternMeta("a", "host", "f16", []int{4}), InternMeta("b", "host", "f16", []int{4})}
	alphabet := []string{"", "\x00", "a", "b", "req-0000", "req-00001", "req-000012345", "req-0000123456789"}
	gr := newGrouper(Filter{LabelKeys: []string{"request"}})
	for range 5000 {
		v := alphabet[rng.IntN(len(alphabet))] + alphabet[rng.IntN(len(alphabet))]
		labels := NewLabels("request", v, "model", "m")
		if rng.IntN(10) == 0 {
			labels = NewLabels("model", "m") // no value of the key
		}
		gr.add(sites[rng.IntN(2)], metas[rng.IntN(2)], labels, nil, int64(rng.IntN(3)+1)*64,
			false, rng.IntN(4) == 0, time.Time{})
	}
	require.Greater(t, gr.n, int32(50))
	got := gr.sorted()
	want := make([]int32, gr.n)
	for i := range want {
		want[i] = int32(i)
	}
	slices.SortFunc(want, func(a, b int32) int { return entryOrder(gr.at(a), gr.at(b)) })
	for i := range want {
		require.Zero(t, entryOrder(gr.at(got[i].at), gr.at(want[i])), "position %d", i)
	}
	assert.True(t, slices.IsSortedFunc(got, func(a, b sortKey) int { return entryOrder(gr.at(a.at), gr.at(b.at)) }))
}
