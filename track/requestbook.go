package track

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// A tracker's book keeps its open requests as they grow and end, so that
// no reader finds them by walking them all: the oldest in a list in the
// order they began, the largest in a heap by what they hold in flight,
// and their sums, all under the lock of the book shard they fall in.
//
// A request's end removes it from the book at once (O(log open)), paid
// by whoever ends it: WithRequest's end function, or httptrack's when
// the handler returns. A request begun by WithLabels on a context
// tensorlife did not make has no end function: its context's cancel is
// code tensorlife cannot hook without a goroutine per request. Its end
// is found by looking at its Done channel, and every request is found
// ended once, by the first of:
//
//   - an exact reading, which checks the requests it is about to show
//     or judge (OpenRequests' rows, a snapshot's records, tracktest);
//   - a sweep: every reading of the gauges (Totals, the sites' figures, a
//     window's end, RequestCosts, a collection) checks the next
//     sweepPerRead listed requests in turn, and every listing the next
//     sweepPerListing of its shard: with at most sweepPerRead requests
//     open, every reading sees every end at once; with more, a gauge lags
//     a labelled context's end by about ⌈open/sweepPerRead⌉ readings (Tracker.Totals);
//   - a record made under the request (it is listed, or rejoins from an
//     owner, after its context is done).
//
// What a request holds changes on the record path, under its own lock;
// the book learns of it lazily: a request changed since the book last
// read it is queued once in its shard's dirty list (one append under the
// shard's lock per request per read), and OpenRequests reads the queued
// ones into the heap and the sums first: it pays for what changed since
// it last read, never for what is open.
//
// Lock order: a registry shard's, a request's, a book shard's; drainMu
// comes before a request's lock.

// bookShards spreads the requests a tracker lists over locks of their own:
// a request is listed once per tracker, at its first record, so the lock
// is taken once per request, not per tensor.
const bookShards = 16

// sweepPerRead is how many listed requests a reading of the gauges checks
// for a done context; sweepPerListing how many each listing checks in its
// shard, which bounds the book at about twice the requests open.
const (
	sweepPerRead    = 32
	sweepPerListing = 2
)

// requestBook lists a tracker's open requests.
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
	// listed mirrors len(open), and queued len(dirty), so that a reader
	// skips an empty shard without its lock: a window in which no request
	// is open takes none.
	listed, queued atomic.Int32
	// open are the listed requests in no order, dones[i] open[i]'s Done
	// channel: packed apart from the requests, so that a sweep reads a
	// channel per request, not the request too.
	open  []*bookEntry
	dones []<-chan struct{}
	swept int // the index in open the next sweep starts at
	// oldest and newest are the ends of the list of open, in the order
	// they began.
	oldest, newest *bookEntry
	// largest is a heap of open by what the book last read of them: the
	// most bytes in flight first (ties: the oldest first).
	largest []*bookEntry
	// bytes and tensors sum what the book last read of open: bytes in
	// 128 bits, since requests of near MaxInt64 bytes each would wrap an
	// int64.
	bytes   counter.Sum
	tensors int64
	// dirty are the entries whose request changed since the book last
	// read it, each once (bookEntry.dirty).
	dirty []*bookEntry
	// labelled indexes the listed requests begun by WithLabels by their
	// Done channel: one entry per open context.
	labelled doneIndex

	drainMu sync.Mutex   // one reader of dirty at a time
	reads   []entryRead  // drain's buffer, under drainMu
	spare   []*bookEntry // drain's other dirty list, under drainMu
}

// bookEntry is one request as one book lists it: a request embeds the
// entry of the first tracker it records in.
type bookEntry struct {
	q    *request
	book *requestBook // set once, under q.mu, before the entry is listed
	// Under the book shard's lock:
	prev, next *bookEntry // the list in the order requests began
	at, heap   int32      // indexes in open and largest; -1 while not listed
	// listed is set and cleared under the shard's lock, and read without
	// it by an end that need not take it.
	listed atomic.Bool
	// dirty is set, under q.mu, while the entry is queued in its shard's
	// dirty list.
	dirty bool
	// begun is when the request was first listed, on the listing
	// tracker's clock, in Unix nanoseconds; set under q.mu before the entry
	// is listed, the same in every book of the request.
	begun int64
	// bytes and tensors are what the book last read of q.
	bytes, tensors int64
	// also is q's entry in the book of another tracker, set under q.mu.
	also *bookEntry
}

// entryRead is what a drain read of one entry's request.
type entryRead struct {
	e              *bookEntry
	bytes, tensors int64
}

// shardOfDone spreads contexts over the book's shards by the address of
// their Done channel, which the garbage collector never moves.
func shardOfDone(done <-chan struct{}) int {
	p := *(*uintptr)(unsafe.Pointer(&done))
	return int((p>>6 ^ p>>12) % bookShards)
}

// shardOf returns q's shard: its Done channel's, or, for a request whose
// context cannot end (BeginRequest on one), its own address's.
func (b *requestBook) shardOf(q *request) *bookShard {
	if q.done == nil {
		p := uintptr(unsafe.Pointer(q))
		return &b.shards[(p>>6^p>>12)%bookShards]
	}
	return &b.shards[shardOfDone(q.done)]
}

// listed is what a listing leaves its caller to do once the request's
// lock is released: end the requests its sweep found done, and drain the
// shard if its dirty list outgrew it. A value, so that a listing allocates
// nothing for it.
type listed struct {
	found [sweepPerListing]*request
	drain *bookData
}

// add lists q, which is recording its first allocation in the book's
// tracker; or, for a request begun by WithLabels whose Done channel
// another listed request shares, returns that request, which q is the
// same as, and lists nothing. Called with q.mu held (a request's lock
// comes before a book shard's), so that nothing records in q between the
// book's answer and its listing.
func (b *requestBook) add(q *request, begun int64) (same *request, after listed) {
	sh := b.shardOf(q)
	sh.mu.Lock()
	if q.labelled {
		if c := sh.labelled.addOrGet(q); c != q {
			sh.mu.Unlock()
			return c, after
		}
	}
	sh.list(q.newEntry(b, begun))
	sh.sweepInto(&after.found)
	if len(sh.dirty) > 2*len(sh.open)+64 { // bounds the dirty list of a book nobody reads
		after.drain = &sh.bookData
	}
	sh.mu.Unlock()
	return q, after
}

// finish ends what the listing found done and drains what it outgrew.
// Called with no request's lock held.
func (after *listed) finish() {
	for _, q := range after.found {
		if q != nil {
			q.end()
		}
	}
	if after.drain != nil {
		after.drain.drain()
	}
}

// list puts e, not listed, in the shard's lists, and queues it dirty.
// Called with sh.mu held.
func (sh *bookData) list(e *bookEntry) {
	e.listed.Store(true)
	e.bytes, e.tensors = 0, 0
	e.at = int32(len(sh.open))
	sh.open = append(sh.open, e)
	sh.dones = append(sh.dones, e.q.done)
	sh.listed.Store(int32(len(sh.open)))
	// In the order requests began: a request listed after a later one
	// (two goroutines listing at once) walks back past it.
	p := sh.newest
	for p != nil && p.begun > e.begun {
		p = p.prev
	}
	e.prev = p
	if p == nil {
		e.next, sh.oldest = sh.oldest, e
	} else {
		e.next, p.next = p.next, e
	}
	if e.next == nil {
		sh.newest = e
	} else {
		e.next.prev = e
	}
	e.heap = int32(len(sh.largest))
	sh.largest = append(sh.largest, e)
	sh.up(int(e.heap))
	sh.dirty = append(sh.dirty, e)
	sh.queued.Store(int32(len(sh.dirty)))
}

// unlist takes e out of the shard's lists, if it is listed, and out of
// its sums. Called with sh.mu held.
func (sh *bookData) unlist(e *bookEntry) {
	if !e.listed.Load() {
		return
	}
	e.listed.Store(false)
	// The hole is filled so that the sweep's lap misses no request: one it
	// has passed fills a hole behind it, one it has not a hole ahead.
	last := len(sh.open) - 1
	i := int(e.at)
	if i < sh.swept {
		j := sh.swept - 1
		sh.move(j, i)
		i = j
		sh.swept--
	}
	if i != last {
		sh.move(last, i)
	}
	sh.open[last], sh.dones[last] = nil, nil
	sh.open, sh.dones = sh.open[:last], sh.dones[:last]
	sh.listed.Store(int32(last))
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		sh.oldest = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		sh.newest = e.prev
	}
	e.prev, e.next = nil, nil
	sh.removeHeap(int(e.heap))
	e.at, e.heap = -1, -1
	sh.bytes.Add(-e.bytes)
	sh.tensors -= e.tensors
	if e.q.labelled {
		sh.labelled.remove(e.q)
	}
	if len(sh.open) == 0 && cap(sh.open) > 1024 { // let a burst's arrays go
		sh.open, sh.dones, sh.largest = nil, nil, nil
	}
}

// move puts the entry at index from in open at index to.
func (sh *bookData) move(from, to int) {
	if from == to {
		return
	}
	m := sh.open[from]
	sh.open[to], sh.dones[to], m.at = m, sh.dones[from], int32(to)
}

// remove takes e out of its book: q's end, with q.mu held. An entry a
// sweep took out already costs no lock.
func (e *bookEntry) remove() {
	if !e.listed.Load() {
		return
	}
	sh := e.book.shardOf(e.q)
	sh.mu.Lock()
	sh.unlist(e)
	sh.mu.Unlock()
}

// queue queues e in its shard's dirty list, once until the next drain:
// its request changed. Called with e.q.mu held.
func (e *bookEntry) queue() {
	if e.dirty || e.book == nil {
		return
	}
	e.dirty = true
	sh := e.book.shardOf(e.q)
	sh.mu.Lock()
	sh.dirty = append(sh.dirty, e)
	sh.queued.Store(int32(len(sh.dirty)))
	sh.mu.Unlock()
}

// drain reads what each queued entry's request holds now into the
// shard's heap and sums: O(entries queued × log open).
func (sh *bookData) drain() {
	if sh.queued.Load() == 0 {
		return
	}
	sh.drainMu.Lock()
	defer sh.drainMu.Unlock()
	sh.mu.Lock()
	dirty := sh.dirty
	sh.dirty = sh.spare[:0]
	sh.queued.Store(0)
	sh.mu.Unlock()
	reads := sh.reads[:0]
	for _, e := range dirty {
		if !e.listed.Load() {
			continue // ended since: its end took it out
		}
		q := e.q
		q.mu.Lock()
		e.dirty = false
		reads = append(reads, entryRead{e: e, bytes: max(q.inFlight.Load(), 0), tensors: q.tensors})
		q.mu.Unlock()
	}
	sh.mu.Lock()
	for _, r := range reads {
		e := r.e
		if !e.listed.Load() {
			continue // ended since: its end took it out
		}
		sh.bytes.Add(r.bytes - e.bytes) // both in [0, MaxInt64]: no wrap
		sh.tensors += r.tensors - e.tensors
		grew := r.bytes > e.bytes
		e.bytes, e.tensors = r.bytes, r.tensors
		if grew {
			sh.up(int(e.heap))
		} else {
			sh.down(int(e.heap))
		}
	}
	sh.mu.Unlock()
	clear(dirty)
	clear(reads)
	sh.spare, sh.reads = dirty[:0], reads[:0]
}

// sweepLocked checks the next k listed requests' Done channels, in turn,
// and appends those done to over, for the caller to end once sh.mu is
// released. Called with sh.mu held.
func (sh *bookData) sweepLocked(over []*request, k int) []*request {
	for range min(k, len(sh.dones)) {
		if len(sh.dones) == 0 {
			break
		}
		if sh.swept >= len(sh.dones) {
			sh.swept = 0 // the next lap
		}
		i := sh.swept
		sh.swept = i + 1
		select {
		case <-sh.dones[i]:
			// Taken out here, under the lock held, so that its end takes
			// no book lock; the hole is filled with an entry not yet
			// looked at, and the sweep goes on from it (unlist).
			e := sh.open[i]
			over = append(over, e.q)
			sh.unlist(e)
		default:
		}
	}
	return over
}

// sweepInto is sweepLocked for a listing: the next sweepPerListing
// requests, those done into found. Called with sh.mu held.
func (sh *bookData) sweepInto(found *[sweepPerListing]*request) {
	n := 0
	for range min(sweepPerListing, len(sh.dones)) {
		if len(sh.dones) == 0 {
			break
		}
		if sh.swept >= len(sh.dones) {
			sh.swept = 0
		}
		i := sh.swept
		sh.swept = i + 1
		select {
		case <-sh.dones[i]:
			e := sh.open[i]
			found[n] = e.q
			n++
			sh.unlist(e)
		default:
		}
	}
}

// sweep checks about sweepPerRead listed requests for a done context,
// each shard its share by the requests it lists, in turn within it, and
// ends those done: what a reading of the gauges pays to see the ends of
// requests begun by WithLabels, whatever is open. Within about ⌈listed/32⌉
// sweeps every request listed throughout was looked at.
func (b *requestBook) sweep() {
	var listed [bookShards]int32
	total := 0
	for i := range b.shards {
		listed[i] = b.shards[i].listed.Load()
		total += int(listed[i])
	}
	if total == 0 {
		return
	}
	var over []*request
	for i := range b.shards {
		if listed[i] == 0 {
			continue
		}
		share := (sweepPerRead*int(listed[i]) + total - 1) / total // at least one
		sh := &b.shards[i]
		sh.mu.Lock()
		over = sh.sweepLocked(over, share)
		sh.mu.Unlock()
	}
	endAll(over)
}

func endAll(qs []*request) {
	for _, q := range qs {
		q.end()
	}
}

// sweep is what every reading of the gauges does first (requestBook.sweep).
func (t *Tracker) sweep() { t.requests.sweep() }

// The heap of largest: a binary max-heap on bookEntry.heap.

func heapBefore(a, b *bookEntry) bool {
	if a.bytes != b.bytes {
		return a.bytes > b.bytes
	}
	return a.begun < b.begun
}

func (sh *bookData) swap(i, j int) {
	h := sh.largest
	h[i], h[j] = h[j], h[i]
	h[i].heap, h[j].heap = int32(i), int32(j)
}

func (sh *bookData) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !heapBefore(sh.largest[i], sh.largest[p]) {
			return
		}
		sh.swap(i, p)
		i = p
	}
}

func (sh *bookData) down(i int) {
	h := sh.largest
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && heapBefore(h[r], h[l]) {
			c = r
		}
		if !heapBefore(h[c], h[i]) {
			return
		}
		sh.swap(i, c)
		i = c
	}
}

func (sh *bookData) removeHeap(i int) {
	last := len(sh.largest) - 1
	if i != last {
		sh.swap(i, last)
	}
	sh.largest[last] = nil
	sh.largest = sh.largest[:last]
	if i != last {
		sh.down(i)
		sh.up(i)
	}
}

// topLargest appends to dst the first n entries of the heap, in order,
// without changing it: a best-first walk of the heap, O(n log n). front is
// its buffer, returned for the next call.
func (sh *bookData) topLargest(dst []*bookEntry, front []int32, n int) ([]*bookEntry, []int32) {
	h := sh.largest
	if n <= 0 || len(h) == 0 {
		return dst, front
	}
	// front is a small heap of heap indexes, best first.
	front = append(front[:0], 0)
	for len(front) > 0 && n > 0 {
		i := front[0]
		dst = append(dst, h[i])
		n--
		last := len(front) - 1
		front[0] = front[last]
		front = front[:last]
		siftFront(front, h, 0)
		for _, c := range [2]int32{2*i + 1, 2*i + 2} {
			if int(c) < len(h) {
				front = append(front, c)
				for j := len(front) - 1; j > 0; {
					p := (j - 1) / 2
					if !heapBefore(h[front[j]], h[front[p]]) {
						break
					}
					front[j], front[p] = front[p], front[j]
					j = p
				}
			}
		}
	}
	return dst, front
}

func siftFront(front []int32, h []*bookEntry, i int) {
	for {
		l := 2*i + 1
		if l >= len(front) {
			return
		}
		c := l
		if r := l + 1; r < len(front) && heapBefore(h[front[r]], h[front[l]]) {
			c = r
		}
		if !heapBefore(h[front[c]], h[front[i]]) {
			return
		}
		front[i], front[c] = front[c], front[i]
		i = c
	}
}

// doneIndex finds a listed request begun by WithLabels by its Done channel:
// an open-addressed table of the requests, linear probing on the channel's
// address, at most half full. It costs a hash and a compare or two where
// a Go map of channels costs several times that, on the path every
// labelled request takes once; a request leaves it when it ends.
type doneIndex struct {
	slots []*request
	n     int
}

// home returns the slot a Done channel's probe starts at: the top bits of
// a multiplicative hash of its address (the low bits of the product
// repeat with the allocator's strides).
func (x *doneIndex) home(done <-chan struct{}) uint64 {
	p := uint64(*(*uintptr)(unsafe.Pointer(&done)))
	return (p * 0x9e3779b97f4a7c15) >> (64 - bits.TrailingZeros(uint(len(x.slots))))
}

// addOrGet returns the request of q's Done channel, indexing q if there is
// none.
func (x *doneIndex) addOrGet(q *request) *request {
	if 2*(x.n+1) > len(x.slots) {
		x.grow(max(16, 2*len(x.slots)))
	}
	mask := uint64(len(x.slots) - 1)
	for i := x.home(q.done); ; i = (i + 1) & mask {
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

// remove takes q out of the index, if it is there, moving back the
// entries after it that their probe allows (no tombstones).
func (x *doneIndex) remove(q *request) {
	if x.n == 0 {
		return
	}
	mask := uint64(len(x.slots) - 1)
	i := x.home(q.done)
	for x.slots[i] != q {
		if x.slots[i] == nil {
			return
		}
		i = (i + 1) & mask
	}
	x.slots[i] = nil
	x.n--
	for j := (i + 1) & mask; x.slots[j] != nil; j = (j + 1) & mask {
		home := x.home(x.slots[j].done)
		// Move slots[j] into the hole at i unless its home lies in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			x.slots[i], x.slots[j] = x.slots[j], nil
			i = j
		}
	}
	if x.n == 0 && len(x.slots) > 1024 { // let a burst's table go
		x.slots = nil
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
