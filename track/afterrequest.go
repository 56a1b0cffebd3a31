package track

import (
	"context"
	"sync/atomic"
)

// AfterRequest arranges for f to run once when ctx's request ends: on the
// goroutine that ends it, as its end function returns, for a request begun
// by WithRequest or BeginRequest (track/httptrack's), so that whatever f
// releases is released as a fact every later reading sees; and when ctx is
// done, as context.AfterFunc runs f (on a goroutine of its own, a
// scheduling later), for a request that ends with its context or a context
// with no request. f runs once, whichever comes first; a request that has
// already ended runs it before AfterRequest returns. stop stops f from
// running and reports whether it did (false: f has run or is running), as
// context.AfterFunc's stop does. A pool's admission ends this way (package
// pool), so a server's request end releases its reservation at once.
//
// f must not block: it runs on the ending goroutine, after the request's
// books are closed and with no lock of tensorlife's held.
func AfterRequest(ctx context.Context, f func()) (stop func() bool) {
	if ctx == nil {
		ctx = context.Background()
	}
	a := &requestAfter{f: f}
	a.ctxStop = context.AfterFunc(ctx, a.run)
	q := scopeOf(ctx).req
	if q == nil {
		return a.stop
	}
	if c := q.canon.Load(); c != nil {
		q = c
	}
	q.mu.Lock()
	if q.ended.Load() {
		q.mu.Unlock()
		a.run()
		return a.stop
	}
	a.q, a.next = q, q.afters
	q.afters = a
	q.mu.Unlock()
	return a.stop
}

// requestAfter is one AfterRequest: f, armed until it runs or is stopped.
type requestAfter struct {
	f       func()
	state   atomic.Int32 // afterArmed, then afterRan or afterStopped
	ctxStop func() bool  // stops the context.AfterFunc
	q       *request     // the request whose afters list holds it; nil if none
	next    *requestAfter
}

const (
	afterArmed = iota
	afterRan
	afterStopped
)

// run runs f if nothing ran or stopped it yet.
func (a *requestAfter) run() {
	if a.state.CompareAndSwap(afterArmed, afterRan) {
		a.ctxStop()
		a.unlist()
		a.f()
	}
}

// stop stops f from running; true if it had not run.
func (a *requestAfter) stop() bool {
	if !a.state.CompareAndSwap(afterArmed, afterStopped) {
		return false
	}
	a.ctxStop()
	a.unlist()
	return true
}

// unlist takes a off its request's list, if it is still there.
func (a *requestAfter) unlist() {
	q := a.q
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for p := &q.afters; *p != nil; p = &(*p).next {
		if *p == a {
			*p = a.next
			return
		}
	}
}

// endBy ends q for its end function (WithRequest's, BeginRequest's) and
// then runs what AfterRequest arranged, on the ending goroutine: the ends
// that readers find (a context found done) leave those to the context's
// AfterFunc, so that no reader runs them.
func (q *request) endBy() {
	q.mu.Lock()
	q.endLocked()
	list := q.afters
	q.afters = nil
	q.mu.Unlock()
	for a := list; a != nil; { // off the list now: no unlist touches them
		next := a.next
		a.run()
		a = next
	}
}
