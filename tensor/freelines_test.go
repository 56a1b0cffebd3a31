package tensor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFreeLinesNumberEachLineOnce(t *testing.T) {
	tab := newFreeLineTable()
	a, b := freeLine{0x1000, 0x2000}, freeLine{0x1000, 0x2008}
	na, nb := tab.number(&a), tab.number(&b)
	require.GreaterOrEqual(t, na, firstFreeLine)
	require.GreaterOrEqual(t, nb, firstFreeLine)
	assert.NotEqual(t, na, nb)
	again := a
	assert.Equal(t, na, tab.number(&again), "the same line must keep its number")
	assert.Equal(t, []uintptr{0x1000, 0x2000}, tab.line(na))
	assert.Equal(t, []uintptr{0x1000, 0x2008}, tab.line(nb))

	short := freeLine{0x3000} // a Free called from the top of a goroutine
	assert.Equal(t, []uintptr{0x3000}, tab.line(tab.number(&short)))

	assert.Nil(t, tab.line(0), "a live handle has no free line")
	assert.Nil(t, tab.line(freedUnknown))
}

func TestFreeLinesFullTableGivesUnknownNeverAWrongLine(t *testing.T) {
	tab := newFreeLineTable()
	numbers := make(map[uint32]freeLine)
	unknown := 0
	for i := range 2 * freeLineSlots {
		pcs := freeLine{uintptr(0x10000 + 16*i), 0x42, 0x43, 0x44}
		n := tab.number(&pcs)
		if n == freedUnknown {
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

func TestMetaHintsCheckContentNotAddress(t *testing.T) {
	kind := "kv-cache"
	other := strings.Clone(kind) // equal content at another address
	m1 := internMeta(kind, "host", Float16, Shape{2, 8})
	m2 := internMeta(other, "host", Float16, Shape{2, 8})
	assert.Same(t, m1, m2, "equal content must share one Meta")

	// Values that may share a hint slot each get their own Meta back.
	for i := range 4 * metaHintSlots {
		shape := Shape{i, 3}
		m := internMeta(kind, "host", Float32, shape)
		require.Equal(t, kind, m.Kind)
		require.Equal(t, "host", m.Device)
		require.Equal(t, "float32", m.DType)
		require.Equal(t, []int(shape), m.Shape)
	}
	m3 := internMeta("mask", "host", Float16, Shape{2, 8})
	assert.Equal(t, "mask", m3.Kind)
	assert.NotSame(t, m1, m3)
}
