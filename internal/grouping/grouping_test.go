package grouping_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/grouping"
)

// entry is a group of words by their first letter and length, told apart
// by the rest of the word.
type entry struct {
	first byte
	size  int
	rest  string
	count int
	hash  uint32
}

type class struct {
	first byte
	size  int
}

func (a class) Compare(b class) int {
	return cmp.Or(cmp.Compare(a.first, b.first), cmp.Compare(a.size, b.size))
}

func (e *entry) Hash() uint32        { return e.hash }
func (e *entry) Class() class        { return class{e.first, e.size} }
func (e *entry) Tie() (string, bool) { return e.rest, e.rest != "" }
func (e *entry) Compare(o *entry) int {
	return cmp.Or(e.Class().Compare(o.Class()), strings.Compare(e.rest, o.rest))
}

type table = grouping.Table[entry, class, *entry]

// add counts word in t; a poor hash (collide) puts many words in one slot.
func add(t *table, word string, collide bool) {
	h := uint32(grouping.Mix(uint64(word[0]), uint64(len(word))))
	if !collide {
		for i := 1; i < len(word); i++ {
			h = uint32(grouping.Mix(uint64(h), uint64(word[i])))
		}
	}
	e, added := t.Find(h, func(e *entry) bool { return e.first == word[0] && e.size == len(word) && e.rest == word[1:] })
	if added {
		*e = entry{first: word[0], size: len(word), rest: word[1:], hash: h}
	}
	e.count++
}

func words(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 1+rng.IntN(12))
		for j := range b {
			b[j] = "abcxyz"[rng.IntN(6)]
		}
		out[i] = string(b)
	}
	return out
}

// The table finds each group again, whatever its hash shares with others,
// across the growths of its index, and keeps entries in the order added.
func TestFindCountsEachGroupOnce(t *testing.T) {
	for _, collide := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(1, 2))
		var tab table
		want := map[string]int{}
		var order []string
		for _, w := range words(rng, 20_000) {
			if want[w] == 0 {
				order = append(order, w)
			}
			want[w]++
			add(&tab, w, collide)
		}
		require.Equal(t, len(want), tab.Len(), "collide %v", collide)
		for i, w := range order {
			e := tab.At(int32(i))
			assert.Equal(t, w, string(e.first)+e.rest)
			assert.Equal(t, want[w], e.count, w)
		}
	}
}

// Sorted gives the order Compare gives, ranked or not, breaking ties by
// the values' bytes or not.
func TestSortedIsTheOrderOfCompare(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		ties bool
		many bool // more classes than Sorted ranks
	}{
		{"ranked, ties", 5000, true, false},
		{"ranked, no ties", 5000, false, false},
		{"past the classes it ranks", 60_000, true, true},
		{"past the classes it ranks, no ties", 60_000, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			var tab table
			for _, w := range words(rng, tc.n) {
				if tc.many {
					// Many first bytes and lengths: many classes.
					w = string(rune(1+rng.IntN(126))) + w + strings.Repeat("z", rng.IntN(100))
				}
				add(&tab, w, false)
			}
			classes := map[class]bool{}
			for i := range tab.Len() {
				classes[tab.At(int32(i)).Class()] = true
			}
			assert.Equal(t, tc.many, len(classes) > max(grouping.MinSortClasses, tab.Len()/8), "%d classes", len(classes))
			keys := tab.Sorted(tc.ties)
			require.Len(t, keys, tab.Len())
			assert.True(t, slices.IsSortedFunc(keys, func(a, b grouping.Key) int { return tab.At(a.At).Compare(tab.At(b.At)) }))
			seen := map[int32]bool{}
			for _, k := range keys {
				seen[k.At] = true
			}
			assert.Len(t, seen, tab.Len(), "every entry once")
		})
	}
}

func Example() {
	var tab table
	for _, w := range strings.Fields("beta alpha beta gamma alpha beta") {
		add(&tab, w, false)
	}
	for _, k := range tab.Sorted(true) {
		e := tab.At(k.At)
		fmt.Println(string(e.first)+e.rest, e.count)
	}
	// Output:
	// alpha 2
	// beta 3
	// gamma 1
}
