package track

import (
	"context"
	"log/slog"
	"runtime/debug"
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
// books are closed and with no lock of tensorlife's held. On the ending
// goroutine a panic or runtime.Goexit in f reaches the end function's
// caller only after every other f of the request has run (a pool's
// reservation is released whatever a neighbour does); on the context's
// goroutine, which no caller can recover on, a panic is recovered and
// noted on the request's tracker (Books.NotePanic; the default logger's
// when it recorded in none). A nil f is nothing to run: stop reports
// false.
func AfterRequest(ctx context.Context, f func()) (stop func() bool) {
	if f == nil {
		return func() bool { return false }
	}
	if ctx == nil {
		ctx = context.Background()
	}
	a := &requestAfter{f: f, q: scopeOf(ctx).req.same()}
	if a.q != nil && a.q.ended.Load() {
		// Ended already (ended is never unset): f runs here, before
		// AfterRequest returns, and no context goroutine races it.
		a.state.Store(afterRan)
		f()
		return a.stop
	}
	// a.q is set before the context's goroutine can start (at once, for a
	// context already done); that goroutine reads no ctxStop (runDone).
	a.ctxStop = context.AfterFunc(ctx, a.runDone)
	q := a.q
	if q == nil {
		return a.stop
	}
	q.mu.Lock()
	if q.ended.Load() {
		q.mu.Unlock()
		a.run()
		return a.stop
	}
	if a.state.Load() == afterArmed { // not run by a context already done
		a.next = q.afters
		q.afters = a
	}
	q.mu.Unlock()
	return a.stop
}

// requestAfter is one AfterRequest: f, armed until it runs or is stopped.
type requestAfter struct {
	f       func()
	state   atomic.Int32 // afterArmed, then afterRan or afterStopped
	ctxStop func() bool  // stops the context.AfterFunc
	q       *request     // the request whose afters list may hold it; nil if none
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

// runDone is run for a context found done, on the goroutine
// context.AfterFunc starts, which may start before AfterFunc returns its
// stop: it stops nothing. f's panic is recovered there, or it would end
// the process.
func (a *requestAfter) runDone() {
	if !a.state.CompareAndSwap(afterArmed, afterRan) {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			a.notePanic(v)
		}
	}()
	a.unlist()
	a.f()
}

// notePanic notes v, recovered from f on the context's goroutine, on the
// tracker the request recorded in first, or logs it through the default
// logger when there is none.
func (a *requestAfter) notePanic(v any) {
	var t *Tracker
	if q := a.q; q != nil {
		q.mu.Lock()
		if b := q.entry.book; b != nil {
			t = b.tracker
		}
		q.mu.Unlock()
	}
	if t != nil {
		t.Books().NotePanic("track.AfterRequest", "f", v)
		return
	}
	defer func() { _ = recover() }() // nor a logger's panic
	slog.Error("tensorlife: a function given to track.AfterRequest panicked", slog.String("panic", panicText(v)),
		slog.String("stack", string(debug.Stack())))
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
	runAll(list) // off the list now: no unlist touches them
}

// runAll runs a and those after it in turn; each one's run is deferred
// behind the one before it, so that a panic or a runtime.Goexit in one f
// stops none of the others, and reaches the caller once they have run.
func runAll(a *requestAfter) {
	if a == nil {
		return
	}
	defer runAll(a.next)
	a.run()
}
