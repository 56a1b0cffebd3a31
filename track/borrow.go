package track

import (
	"context"
	"sync"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// Borrow is a handle on a record taken under a request (Record.HoldUnder):
// a Retain a request makes, a cache hit it uses. While the request is open
// the handle is the request's to free. Once the request has ended with the
// handle still held, the handle has outlived its request, a fact: its line
// counts it (SiteStats.OutlivedHandles) and a growth watcher names that
// line at its next window, even while another holder (a cache) keeps the
// memory, with no growth to wait for. Return ends the borrow: its handle
// was freed, handed to an owner, or dropped.
//
// A request's end is O(1) per borrow it still holds; taking and returning
// one is one lock of the tracker's borrow book, taken by nothing on the
// record path. Safe for concurrent use.
type Borrow struct {
	t     *Tracker
	q     *request
	site  *Site
	bytes int64
	state borrowState // under t.borrows.mu
	// prev and next link the open borrows of one request, under
	// t.borrows.mu: taking and returning one allocates no list.
	prev, next *Borrow
}

type borrowState uint8

const (
	borrowOpen     borrowState = iota // its request is open
	borrowOutlived                    // its request ended with it held
	borrowReturned                    // Return was called
)

// borrowBook is a tracker's open borrows, by the request they were taken
// under.
type borrowBook struct {
	mu   sync.Mutex
	open map[*request]*Borrow // the first of each request's open borrows
}

// HoldUnder counts a handle on r made at site by how, as Hold does, taken
// under ctx's request: a Borrow, which the handle returns when it is freed
// or handed to an owner. Under no request it is Hold and returns nil:
// nothing states the handle's lifetime, and nothing is judged. Taken under
// a request that has already ended, the handle has outlived it at once.
// The request is listed in r's tracker (OpenRequests) if it was not, so
// that its end, by its end function or its context, is seen.
func (r *Record) HoldUnder(ctx context.Context, site *Site, how string) *Borrow {
	if r == nil || site == nil || r.tracker == nil {
		return nil
	}
	r.Hold(site, how)
	q := scopeOf(ctx).req
	if q == nil {
		return nil
	}
	t := r.tracker
	q = t.listBorrower(q)
	b := &Borrow{t: t, q: q, site: site, bytes: r.Bytes}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended.Load() {
		t.borrows.outlive(b)
		return b
	}
	q.borrowed = true
	t.borrows.add(q, b)
	return b
}

// Return ends b: its handle was freed, handed to an owner, or dropped. A
// handle that had outlived its request is no longer counted at its line.
// A nil Borrow, or a second Return, does nothing.
func (b *Borrow) Return() {
	if b == nil {
		return
	}
	bb := &b.t.borrows
	bb.mu.Lock()
	defer bb.mu.Unlock()
	switch b.state {
	case borrowOpen:
		switch {
		case b.prev != nil:
			b.prev.next = b.next
		case b.next != nil:
			bb.open[b.q] = b.next
		default:
			delete(bb.open, b.q)
		}
		if b.next != nil {
			b.next.prev = b.prev
		}
		b.prev, b.next = nil, nil
	case borrowOutlived:
		b.site.handlesOutlived(-b.bytes, -1)
	}
	b.state = borrowReturned
}

// add lists b, taken under the open request q. Called with q.mu held.
func (bb *borrowBook) add(q *request, b *Borrow) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	if bb.open == nil {
		bb.open = make(map[*request]*Borrow)
	}
	if first := bb.open[q]; first != nil {
		b.next, first.prev = first, b
	}
	bb.open[q] = b
}

// outlive counts b, whose request has ended, at its line.
func (bb *borrowBook) outlive(b *Borrow) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	if b.state == borrowOpen {
		b.state = borrowOutlived
		b.site.handlesOutlived(b.bytes, 1)
	}
}

// ended counts the borrows q still holds as outlived: O(1) a borrow.
// Called with q.mu held, by q's end.
func (bb *borrowBook) ended(q *request) {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	for b := bb.open[q]; b != nil; {
		next := b.next
		b.state, b.prev, b.next = borrowOutlived, nil, nil
		b.site.handlesOutlived(b.bytes, 1)
		b = next
	}
	delete(bb.open, q)
}

// listBorrower lists q in t's book, as its first record would (see
// request.join), and returns the request q is the same as.
func (t *Tracker) listBorrower(q *request) *request {
	b := &t.requests
	if c := q.canon.Load(); c != nil {
		q = c
	}
	q.mu.Lock()
	if q.entryIn(b) != nil || q.ended.Load() {
		q.mu.Unlock()
		return q
	}
	begun := q.entry.begun // when it was first listed, in another tracker
	if q.entry.book == nil {
		begun = t.Now().UnixNano()
	}
	same, after := b.add(q, begun)
	if same != q {
		q.mu.Unlock()
		q.canon.CompareAndSwap(nil, same)
		return t.listBorrower(q.canon.Load())
	}
	q.mu.Unlock()
	after.finish()
	if q.isDone() { // listed after its context was done
		q.end()
	}
	return q
}

// handlesOutlived counts count handles (negative to take them back) on
// records of bytes that outlived their request at s, the line that took
// them, and tells the feeds.
func (s *Site) handlesOutlived(bytes, count int64) {
	s.addPair(bytes, count, &s.outlivedHandleBytes, &s.outlivedHandles,
		func(w *siteWide) *counter.Sum { return &w.outlivedHandleBytes })
}
