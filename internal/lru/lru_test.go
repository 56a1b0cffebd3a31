package lru_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/internal/lru"
)

func order(l *lru.List[string]) []string {
	var out []string
	var taken []*lru.Elem[string]
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

func TestList(t *testing.T) {
	var l lru.List[string]
	require.Nil(t, l.Back())
	a, b, c := &lru.Elem[string]{Value: "a"}, &lru.Elem[string]{Value: "b"}, &lru.Elem[string]{Value: "c"}
	l.PushFront(a)
	l.PushFront(b)
	l.PushFront(c)
	assert.Equal(t, 3, l.Len())
	assert.Equal(t, []string{"a", "b", "c"}, order(&l), "least recently used first")
	l.MoveToFront(a)
	assert.Equal(t, []string{"b", "c", "a"}, order(&l))
	l.Remove(c)
	l.Remove(c) // not in the list any more: ignored
	assert.Equal(t, 2, l.Len())
	assert.Equal(t, []string{"b", "a"}, order(&l))

	var other lru.List[string]
	other.Remove(a) // a belongs to l
	other.MoveToFront(a)
	assert.Equal(t, 2, l.Len())
	assert.Equal(t, 0, other.Len())

	l.Clear()
	assert.Equal(t, 0, l.Len())
	assert.Nil(t, l.Back())
}

func Example() {
	var l lru.List[string]
	l.PushFront(&lru.Elem[string]{Value: "old"})
	l.PushFront(&lru.Elem[string]{Value: "new"})
	fmt.Println(l.Back().Value)
	// Output: old
}
