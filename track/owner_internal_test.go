package track

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Books leave the registry in any order, each in O(1) (a swap with the
// last): what stays listed is exactly the books not removed, and a second
// removal of a book does nothing.
func TestOwnerRegistryRemovesInAnyOrder(t *testing.T) {
	var r ownerRegistry
	const n = 5000
	books := make([]*ownerBook, n)
	for i := range books {
		books[i] = &ownerBook{}
		r.add(books[i])
	}
	left := make(map[*ownerBook]bool, n)
	for _, b := range books {
		left[b] = true
	}
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(n)[:n-10] {
		r.remove(books[i])
		r.remove(books[i]) // harmless
		delete(left, books[i])
	}
	list := r.list()
	require.Len(t, list, len(left))
	for i, b := range list {
		assert.True(t, left[b])
		assert.Equal(t, i, b.index)
	}
	assert.LessOrEqual(t, cap(r.books), 64+4*len(list), "the list gives back what dropped owners took")
}

// BenchmarkOwnerRegistryRemove drops 200k owners' books, as one collection
// that finds 200k owners dropped does: ns/removal stays flat in the number
// of owners.
func BenchmarkOwnerRegistryRemove(b *testing.B) {
	b.ReportAllocs()
	const n = 200_000
	books := make([]*ownerBook, n)
	for i := range books {
		books[i] = &ownerBook{}
	}
	for b.Loop() {
		var r ownerRegistry
		for _, k := range books {
			r.add(k)
		}
		for _, k := range books {
			r.remove(k)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/removal")
}
