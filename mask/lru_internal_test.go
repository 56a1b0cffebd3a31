package mask

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lruOrder(l *lruList[string]) []string {
	var out []string
	var taken []*lruElem[string]
	for e := l.Back(); e != nil; e = l.Back() {
		out = append(out, e.Value)
		l.Remove(e)
		taken = append(taken, e)
	}
	for _, e := range taken { // least recent first, so the most recent ends in front
		l.PushFront(e)
	}
	return out
}

func TestLRUList(t *testing.T) {
	var l lruList[string]
	require.Nil(t, l.Back())
	a, b, c := &lruElem[string]{Value: "a"}, &lruElem[string]{Value: "b"}, &lruElem[string]{Value: "c"}
	l.PushFront(a)
	l.PushFront(b)
	l.PushFront(c)
	assert.Equal(t, 3, l.Len())
	assert.Equal(t, []string{"a", "b", "c"}, lruOrder(&l), "least recently used first")
	l.MoveToFront(a)
	assert.Equal(t, []string{"b", "c", "a"}, lruOrder(&l))
	l.Remove(c)
	l.Remove(c) // not in the list any more: ignored
	assert.Equal(t, 2, l.Len())
	assert.Equal(t, []string{"b", "a"}, lruOrder(&l))

	var other lruList[string]
	other.Remove(a) // a belongs to l
	other.MoveToFront(a)
	assert.Equal(t, 2, l.Len())
	assert.Equal(t, 0, other.Len())

	l.Clear()
	assert.Equal(t, 0, l.Len())
	assert.Nil(t, l.Back())
}
