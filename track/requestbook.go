package track

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// jobHorizon is how many jobs of one context stay open. A request begun by
// WithLabels on a context under no request is a job of that context: a
// server's request context (net/http, gRPC) has one, a worker's long-lived
// context one per WithLabels call. A job ends when its context is done or,
// failing that, once more than jobHorizon jobs of the same context that
// began after it have recorded in the tracker: a worker is done with a job
// long before it has begun 64 more, so what a worker's job leaks outlives
// it and is judged, while a request that lengthens its KV cache under one
// WithLabels is one job and is never cut short. A worker that scopes each
// job with WithRequest ends each one exactly.
const jobHorizon = 64

// bookShards spreads the requests a tracker lists over locks of their own:
// a request is listed once per tracker, at its first record, so the lock
// is taken once per request, not per tensor.
const bookShards = 16

// requestBook lists a tracker's open requests: those that have recorded in
// it and whose end it has not yet seen, in the order they were listed.
// Readers settle it (Tracker.settle) before they read: each listed request
// whose context is done, or which is a job passed by jobHorizon later jobs,
// is ended then. Listing settles its shard too once the shard has doubled
// since it was last settled, so a tracker nobody reads lists O(requests
// open), amortized O(1) a request. Jobs of one context share a shard, so
// one shard sees every later job of a job.
type requestBook struct {
	shards [bookShards]bookShard
}

type bookShard struct {
	bookData
	_ [counter.CacheLine - unsafe.Sizeof(bookData{})%counter.CacheLine]byte
}

type bookData struct {
	mu      sync.Mutex
	open    []*request
	settled int // len(open) after the last settle
}

// shardOfDone spreads contexts over the book's shards by the address of
// their Done channel, which the garbage collector never moves.
func shardOfDone(done <-chan struct{}) int {
	p := *(*uintptr)(unsafe.Pointer(&done))
	return int((p>>6 ^ p>>12) % bookShards)
}

// add lists q, which has just recorded its first allocation in the book's
// tracker.
func (b *requestBook) add(q *request) {
	sh := &b.shards[shardOfDone(q.done)]
	sh.mu.Lock()
	sh.open = append(sh.open, q)
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
	jobs := 0
	for _, q := range sh.open {
		if ended := q.ended.Load(); ended || q.isDone() {
			if !ended {
				over = append(over, q)
			}
			continue
		}
		open = append(open, q)
		if q.job {
			jobs++
		}
	}
	if jobs > jobHorizon { // some context may have more than its horizon open
		later := make(map[<-chan struct{}]int)
		kept := len(open)
		for i := len(open) - 1; i >= 0; i-- { // newest first
			q := open[i]
			if !q.job {
				continue
			}
			if later[q.done]++; later[q.done] > jobHorizon {
				over = append(over, q)
				open[i] = nil
				kept--
			}
		}
		if kept < len(open) {
			open = slices.DeleteFunc(open, func(q *request) bool { return q == nil })
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
