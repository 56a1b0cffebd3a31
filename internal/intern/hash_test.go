package intern

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Keys that differ in one byte, wherever it is, must spread over the low
// bits that pick a slot: the multiply alone would leave a difference in a
// word's top byte in the state's top byte.
func TestHashSpreadsEveryByte(t *testing.T) {
	for n := 1; n <= 20; n++ {
		for pos := range n {
			b := []byte(strings.Repeat("k", n))
			slots := make(map[uint64]bool)
			for c := range 256 {
				b[pos] = byte(c)
				slots[NewHash().String(string(b)).Sum()&255] = true
			}
			// 256 keys thrown at random into 256 slots fill about 162;
			// this hash filled at least 118 over a thousand seeds, where
			// the multiply with only a shift after it, as the stack
			// table had, fills as few as one.
			assert.Greater(t, len(slots), 96, "length %d, byte %d", n, pos)
		}
	}
}

func TestHashSpreadsHighBitsOfWords(t *testing.T) {
	for _, shift := range []int{0, 12, 24, 40, 56} {
		slots := make(map[uint64]bool)
		for i := range 256 {
			pcs := []uintptr{0x401000, 0x402000 + uintptr(i)<<shift, 0x403000}
			slots[NewHash().PCs(pcs).Sum()&255] = true
		}
		assert.Greater(t, len(slots), 96, "words differing at bit %d", shift)
	}
}

func TestHashTellsApartWhatKeysAreMadeOf(t *testing.T) {
	sum := func(h Hash) uint64 { return h.Sum() }
	assert.Equal(t, sum(NewHash().String("cuda:0")), sum(NewHash().String("cuda:0")))
	assert.NotEqual(t, sum(NewHash().String("ab").String("c")), sum(NewHash().String("a").String("bc")))
	assert.NotEqual(t, sum(NewHash().Ints([]int{1, 2})), sum(NewHash().Ints([]int{2, 1})))
	assert.NotEqual(t, sum(NewHash().Ints(nil)), sum(NewHash().Ints([]int{0})))
	assert.NotEqual(t, sum(NewHash().String("")), sum(NewHash()), "an empty string counts")
	assert.Equal(t, sum(NewHash().PCs([]uintptr{1, 2})), sum(NewHash().Word(1).Word(2)))
}
