package track

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// settleSlack is how many requests a book shard lists past twice what it
// held at its last settle before listing settles it: a tracker nobody reads
// lists O(requests open), amortized O(1) a request.
const settleSlack = 64

// bookShards spreads the requests a tracker lists over locks of their own:
// a request is listed once per tracker, at its first record, so the lock
// is taken once per request, not per tensor.
const bookShards = 16

// requestBook lists a tracker's open requests: those that have recorded in
// it and whose end it has not yet seen, in the order they were listed.
// Readers settle it (Tracker.settle) before they read: each listed request
// whose context is done is ended then, and nothing else ends one. Listing
// settles its shard too once the shard has doubled since it was last
// settled (settleSlack). Requests of one Done channel share a shard, whose
// index of them (labelled) makes the label calls on one context one
// request: the first listed stands for every later one.
type requestBook struct {
	shards  [bookShards]bookShard
	tracker *Tracker // whose book it is: its kinds count the requests that end
}

type bookShard struct {
	bookData
	_ [counter.CacheLine - unsafe.Sizeof(bookData{})%counter.CacheLine]byte
}

type bookData struct {
	mu sync.Mutex
	// listed mirrors len(open), so that a reader skips an empty shard
	// without its lock: a window in which no request is open takes none.
	listed atomic.Int32
	open   []*request
	// dones are the open requests' Done channels, dones[i] open[i]'s:
	// packed apart from the requests, so that a settle, which checks each
	// one, reads a channel per request and not the request too (a
	// request's end closes its channel first, so a closed one is all a
	// settle needs to see).
	dones   []<-chan struct{}
	settled int // len(open) after the last settle
	// labelled indexes the listed requests begun by WithLabels by their
	// Done channel: one entry per open context.
	labelled doneIndex
}

// shardOfDone spreads contexts over the book's shards by the address of
// their Done channel, which the garbage collector never moves.
func shardOfDone(done <-chan struct{}) int {
	p := *(*uintptr)(unsafe.Pointer(&done))
	return int((p>>6 ^ p>>12) % bookShards)
}

// add lists q, which is recording its first allocation in the book's
// tracker, and returns it; or, for a request begun by WithLabels whose Done
// channel another listed request shares, returns that one, which q is the
// same as, and lists nothing. A request begun by WithLabels added again is
// listed once; any other is added once, by the record that marked it
// listed (request.join).
func (b *requestBook) add(q *request) *request {
	sh := &b.shards[shardOfDone(q.done)]
	sh.mu.Lock()
	if q.labelled {
		if c := sh.labelled.addOrGet(q); c != q {
			sh.mu.Unlock()
			return c
		}
	}
	sh.open = append(sh.open, q)
	sh.dones = append(sh.dones, q.done)
	sh.listed.Store(int32(len(sh.open)))
	var over []*request
	if len(sh.open) >= 2*sh.settled+settleSlack {
		over = sh.collect(nil)
	}
	sh.mu.Unlock()
	endAll(over)
	return q
}

// settle ends every listed request that is over, so that what a reader
// reads next counts their tensors as outlived: O(requests listed).
func (b *requestBook) settle() {
	var over []*request
	for i := range b.shards {
		sh := &b.shards[i]
		if sh.listed.Load() == 0 {
			continue // a request listed from now on is read by the next settle
		}
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
	kept := 0 // the open ones move down in place, written only once one is over
	for i, done := range sh.dones {
		select {
		case <-done:
			if q := sh.open[i]; !q.ended.Load() {
				over = append(over, q)
			}
		default:
			if kept != i {
				sh.open[kept], sh.dones[kept] = sh.open[i], done
			}
			kept++
		}
	}
	clear(sh.open[kept:]) // drop the unlisted requests' memory
	clear(sh.dones[kept:])
	sh.open, sh.dones = sh.open[:kept], sh.dones[:kept]
	open := sh.open
	sh.labelled.rebuild(open)
	sh.listed.Store(int32(len(open)))
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

// doneIndex finds a listed request begun by WithLabels by its Done channel:
// an open-addressed table of the requests, linear probing on the channel's
// address, at most half full. It costs a hash and a compare or two where
// a Go map of channels costs several times that, on the path every
// labelled request takes once; collect rebuilds it from the requests still
// listed, so it never holds an ended one.
type doneIndex struct {
	slots []*request
	n     int
}

func doneHash(done <-chan struct{}) uint64 {
	p := uint64(*(*uintptr)(unsafe.Pointer(&done)))
	return (p >> 4) * 0x9e3779b97f4a7c15
}

// addOrGet returns the request of q's Done channel, indexing q if there is
// none.
func (x *doneIndex) addOrGet(q *request) *request {
	if 2*(x.n+1) > len(x.slots) {
		x.grow(max(16, 2*len(x.slots)))
	}
	mask := uint64(len(x.slots) - 1)
	for i := doneHash(q.done) & mask; ; i = (i + 1) & mask {
		switch c := x.slots[i]; {
		case c == nil:
			x.slots[i] = q
			x.n++
			return q
		case c.done == q.done:
			return c
		}
	}
}

// grow makes the table size slots, a power of two, and reindexes.
func (x *doneIndex) grow(size int) {
	old := x.slots
	x.slots, x.n = make([]*request, size), 0
	for _, q := range old {
		if q != nil {
			x.addOrGet(q)
		}
	}
}

// rebuild indexes the requests begun by WithLabels among open alone.
func (x *doneIndex) rebuild(open []*request) {
	if x.n == 0 {
		return
	}
	labelled := 0
	for _, q := range open {
		if q.labelled {
			labelled++
		}
	}
	size := 16
	for size < 2*labelled {
		size *= 2
	}
	if size < len(x.slots) {
		x.slots = make([]*request, size)
	} else {
		clear(x.slots)
	}
	x.n = 0
	for _, q := range open {
		if q.labelled {
			x.addOrGet(q)
		}
	}
}
