// The intrusive recency list behind the package's bounded memories: the
// mask cache and the rebuild detector's memory of recent requests. An element carries its value and its links, so a cache keeps one
// allocation per entry (the element its map points to) and every operation
// is O(1) with no allocation.
//
// A list is not safe for concurrent use; the cache that owns it guards it
// with its own lock.
package mask

// lruElem is one element of an lruList. The zero lruElem is not in any list.
type lruElem[T any] struct {
	Value      T
	prev, next *lruElem[T]
	list       *lruList[T]
}

// lruList orders elements from most recently used (front) to least (back). The
// zero lruList is empty and ready to use.
type lruList[T any] struct {
	root lruElem[T] // sentinel: root.next is the front, root.prev the back
	n    int
}

func (l *lruList[T]) lazyInit() {
	if l.root.next == nil {
		l.root.next, l.root.prev = &l.root, &l.root
	}
}

// Len returns the number of elements.
func (l *lruList[T]) Len() int { return l.n }

// PushFront puts e, which must not be in a list, at the front.
func (l *lruList[T]) PushFront(e *lruElem[T]) {
	l.lazyInit()
	e.prev, e.next, e.list = &l.root, l.root.next, l
	l.root.next.prev = e
	l.root.next = e
	l.n++
}

// MoveToFront marks e, an element of l, as the most recently used.
func (l *lruList[T]) MoveToFront(e *lruElem[T]) {
	if e.list != l || l.root.next == e {
		return
	}
	l.Remove(e)
	l.PushFront(e)
}

// Remove takes e out of l; an element of another list, or of none, is left
// alone.
func (l *lruList[T]) Remove(e *lruElem[T]) {
	if e.list != l {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next, e.list = nil, nil, nil
	l.n--
}

// Back returns the least recently used element, or nil if l is empty.
func (l *lruList[T]) Back() *lruElem[T] {
	if l.n == 0 {
		return nil
	}
	return l.root.prev
}

// Clear empties l in O(1); the elements it held must not be used with it
// again.
func (l *lruList[T]) Clear() {
	l.root.next, l.root.prev = &l.root, &l.root
	l.n = 0
}
