package track

import (
	"hash/maphash"
	"sync"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/cacheline"
)

// jobHorizon is how many later jobs of one context end a job. A request
// begun by WithLabels on a context under no request is a job of that
// context: a server's request context (net/http, gRPC) has one, a worker's
// long-lived context one per WithLabels call. A job ends when its context
// is done or, failing that, once jobHorizon later jobs of the same context
// have recorded in the tracker: a worker is done with a job long before it
// has begun 64 more, so what a worker's job leaks outlives it and is
// judged, while a request that lengthens its KV cache under one WithLabels
// is one job and is never cut short. A worker that scopes each job with
// WithRequest ends each one exactly.
const jobHorizon = 64

// bookShards spreads the requests a tracker lists over locks of their own:
// a request is listed once per tracker, at its first record, so the lock
// is taken once per request, not per tensor.
const bookShards = 16

// requestBook lists a tracker's open requests: those that have recorded in
// it and whose end it has not yet seen. Readers settle it (Tracker.settle)
// before they read: each listed request whose context is done, or whose
// job has been passed by jobHorizon later jobs, is ended then. Listing
// settles its shard too once the shard has doubled since it was last
// settled, so a tracker nobody reads lists O(requests open), amortized
// O(1) a request.
type requestBook struct {
	shards [bookShards]bookShard
}

type bookShard struct {
	bookData
	_ [cacheline.Size - unsafe.Sizeof(bookData{})%cacheline.Size]byte
}

type bookData struct {
	mu      sync.Mutex
	open    []openRequest
	settled int                          // len(open) after the last settle
	lines   map[<-chan struct{}]*jobLine // the jobs of each context with open jobs
}

// openRequest is a listed request and, for a job, its place in its line.
type openRequest struct {
	q    *request
	line *jobLine
	gen  uint64
}

// jobLine counts the jobs of one context that have recorded in a tracker.
type jobLine struct {
	begun uint64 // jobs listed so far
	open  int    // of them, those still listed
}

var bookSeed = maphash.MakeSeed()

// add lists q, which has just recorded its first allocation in the book's
// tracker. Jobs of one context share a shard, so their line is one.
func (b *requestBook) add(q *request) {
	sh := &b.shards[maphash.Comparable(bookSeed, q.done)%bookShards]
	sh.mu.Lock()
	e := openRequest{q: q}
	if q.job {
		line := sh.lines[q.done]
		if line == nil {
			if sh.lines == nil {
				sh.lines = make(map[<-chan struct{}]*jobLine)
			}
			line = &jobLine{}
			sh.lines[q.done] = line
		}
		line.begun++
		line.open++
		e.line, e.gen = line, line.begun
	}
	sh.open = append(sh.open, e)
	var over []*request
	if len(sh.open) >= 2*sh.settled+jobHorizon {
		over = sh.collect(nil)
	}
	sh.mu.Unlock()
	endAll(over)
}

// settle ends every listed request that is over, so that what a reader
// reads next counts their tensors as outlived: O(requests listed).
func (b *requestBook) settle() {
	var over []*request
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		if len(sh.open) > 0 {
			over = sh.collect(over)
		}
		sh.mu.Unlock()
	}
	endAll(over)
}

// collect unlists the requests that are over, appending those not yet
// ended to over. Called with the shard's lock held; the caller ends them
// once it is released.
func (sh *bookData) collect(over []*request) []*request {
	open := sh.open[:0]
	for _, e := range sh.open {
		q := e.q
		ended := q.ended.Load()
		passed := e.line != nil && e.line.begun-e.gen >= jobHorizon
		if !ended && !passed && !q.isDone() {
			open = append(open, e)
			continue
		}
		if !ended {
			over = append(over, q)
		}
		if e.line != nil {
			if e.line.open--; e.line.open == 0 {
				delete(sh.lines, q.done)
			}
		}
	}
	clear(sh.open[len(open):]) // drop the unlisted requests' memory
	sh.open = open
	sh.settled = len(open)
	return over
}

func endAll(qs []*request) {
	for _, q := range qs {
		q.end()
	}
}

// settle ends t's requests that are over: every reader calls it first.
func (t *Tracker) settle() { t.requests.settle() }
