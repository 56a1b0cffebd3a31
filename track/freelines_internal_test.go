package track

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFreeLinesNumberEachLineOnce(t *testing.T) {
	tab := newFreeLineTable()
	a, b := freeLine{0x1000, 0x2000}, freeLine{0x1000, 0x2008}
	na, nb := tab.number(&a), tab.number(&b)
	require.Positive(t, na)
	require.Positive(t, nb)
	assert.NotEqual(t, na, nb)
	again := a
	assert.Equal(t, na, tab.number(&again), "the same line must keep its number")
	assert.Equal(t, []uintptr{0x1000, 0x2000}, tab.line(na))
	assert.Equal(t, []uintptr{0x1000, 0x2008}, tab.line(nb))

	short := freeLine{0x3000} // a Free called from the top of a goroutine
	assert.Equal(t, []uintptr{0x3000}, tab.line(tab.number(&short)))

	assert.Nil(t, tab.line(0), "a line not kept has no frames")
	assert.Nil(t, tab.line(freeLineSlots+1))
}

func TestFreeLinesFullTableGivesUnknownNeverAWrongLine(t *testing.T) {
	tab := newFreeLineTable()
	numbers := make(map[uint32]freeLine)
	unknown := 0
	for i := range 2 * freeLineSlots {
		pcs := freeLine{uintptr(0x10000 + 16*i), 0x42, 0x43, 0x44}
		n := tab.number(&pcs)
		if n == 0 {
			unknown++
			continue
		}
		if prev, ok := numbers[n]; ok {
			t.Fatalf("lines %x and %x share number %d", prev, pcs, n)
		}
		numbers[n] = pcs
	}
	assert.Positive(t, unknown, "twice as many lines as slots cannot all be kept")
	for n, pcs := range numbers {
		require.Equal(t, pcs[:], tab.line(n))
	}
}

// Past a full free-line table, a free loses its line: the tracker whose
// Free it was counts it, and FreeSite names nothing rather than a wrong line.
func TestFreeLinesLostAreCounted(t *testing.T) {
	saved := freeLines
	t.Cleanup(func() { freeLines = saved })
	freeLines = newFreeLineTable()
	for i := 0; !freeLines.table.Full() && i < 64*freeLineSlots; i++ { // lines no Free has
		pcs := freeLine{uintptr(0x10000 + 16*i), 0x42}
		freeLines.number(&pcs)
	}
	require.True(t, freeLines.table.Full())
	tr, err := New()
	require.NoError(t, err)
	n := tr.Books().FreeLine(0)
	assert.Zero(t, n)
	site, _ := tr.Books().FreeSite(n)
	assert.Nil(t, site)
	assert.EqualValues(t, 1, tr.Totals().FreeLinesLost)
	other, err := New()
	require.NoError(t, err)
	assert.Zero(t, other.Totals().FreeLinesLost, "counted by the tracker whose free lost it")
}
