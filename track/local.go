package track

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// A Local is state of type T that a package keeps per tracker (a cursor, a
// set of books), made on first use and dropped with the tracker: so that no
// process-wide table is keyed by trackers. Declare one per kind of state,
// at package level:
//
//	var books = track.NewLocal(func() *adoptionBooks { return new(adoptionBooks) })
//
// and read it with books.Of(tr). A tracker keeps the values of at most
// MaxLocals Locals: a Local made per call, not at package level, fails
// past them with ErrTooManyLocals instead of growing every tracker it is
// used with. A Local is safe for concurrent use.
type Local[T any] struct {
	index int
	mk    func() *T
	// made is where NewLocal was called, for the panic of a maker that
	// reads its own Local.
	made string
	// making counts the calls of mk under way, on every tracker: a maker
	// that reads its own Local recurses without end, and the count tells
	// it from callers racing to make the first value.
	making atomic.Int64
}

// MaxLocals is how many Locals' values one tracker keeps.
const MaxLocals = 256

// ErrTooManyLocals means a tracker already keeps the values of MaxLocals
// Locals: a Local is declared once per kind of state, at package level,
// not made per call.
var ErrTooManyLocals = errors.New("track: a tracker keeps the values of at most 256 Locals (declare a Local at package level, not per call)")

// maxMaking is how many makers of one Local may run at once before Of
// takes them for a maker that reads its own Local. Racing callers are
// far fewer; a recursion reaches it long before the stack overflows.
const maxMaking = 1 << 14

// locals holds a tracker's Local values, by Local index. A value is made
// outside the lock (a maker may itself read a Local of the same tracker),
// and the first one stored wins.
type locals struct {
	mu     sync.Mutex
	values map[int]any // each the *T of the Local with its index; at most MaxLocals
}

// localCount numbers the Locals of the process.
var localCount struct {
	mu sync.Mutex
	n  int
}

// NewLocal returns a Local whose value in a tracker is made by mk, once per
// tracker (a second value made by a race is dropped unused); a nil mk, or
// one that returns nil, makes new(T). mk may read other Locals of the
// tracker, never its own: Of panics, naming the Local, when it does.
func NewLocal[T any](mk func() *T) *Local[T] {
	if mk == nil {
		mk = func() *T { return new(T) }
	}
	made := "an unknown line"
	if _, file, line, ok := runtime.Caller(1); ok {
		made = fmt.Sprintf("%s:%d", file, line)
	}
	localCount.mu.Lock()
	defer localCount.mu.Unlock()
	l := &Local[T]{index: localCount.n, mk: mk, made: made}
	localCount.n++
	return l
}

// Of returns l's value in t, making it on first use. It fails with
// ErrTooManyLocals when t keeps the values of MaxLocals other Locals.
func (l *Local[T]) Of(t *Tracker) (*T, error) {
	s := &t.locals
	s.mu.Lock()
	if v, ok := s.values[l.index]; ok {
		s.mu.Unlock()
		return v.(*T), nil // the slot of l holds only *T
	}
	full := len(s.values) >= MaxLocals
	s.mu.Unlock()
	if full {
		return nil, fmt.Errorf("%w: the Local of %T made at %s", ErrTooManyLocals, (*T)(nil), l.made)
	}
	v := l.make() // without the lock: mk may read another Local of t
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.values[l.index]; ok {
		return w.(*T), nil
	}
	if len(s.values) >= MaxLocals {
		return nil, fmt.Errorf("%w: the Local of %T made at %s", ErrTooManyLocals, (*T)(nil), l.made)
	}
	if s.values == nil {
		s.values = make(map[int]any)
	}
	s.values[l.index] = v
	return v, nil
}

// make calls mk, counted in making, and panics, naming the Local, once
// so many calls are under way that mk must be reading its own Local.
func (l *Local[T]) make() *T {
	if l.making.Add(1) > maxMaking {
		l.making.Add(-1)
		panic(fmt.Sprintf("track: the maker of the Local of %T made at %s reads its own Local: a maker may read other Locals only", (*T)(nil), l.made))
	}
	defer l.making.Add(-1)
	if v := l.mk(); v != nil {
		return v
	}
	return new(T) // Of never returns a nil value with a nil error
}
