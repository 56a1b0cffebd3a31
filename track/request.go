package track

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// A request is one unit of a service's work, begun by WithRequest or by the
// first WithLabels on a context that can end, and ended with that context.
// It counts, per site, the live bytes made under it and not yet released
// or handed over; its end adds them to the sites' outlived counters, O(1)
// per site (at most one per tensor it still holds), with no walk of the live
// set and no clock. A record made under it is outlived from then on: the
// record need not be touched, as outlived() reads the request's end.
//
// Its end costs whoever ends it: WithRequest's end function ends it then,
// and takes it out of the books of the trackers it recorded in. A request
// begun by WithLabels has no end function: the first reader or listing
// that finds its context done ends it, once (requestbook.go says which
// readers look, and how soon). No goroutine or callback is registered per
// request.
//
// Lock order: a shard's lock, then a request's, then a request book
// shard's; end is never called with a book shard's lock held.
type request struct {
	mu    sync.Mutex
	ended atomic.Bool // set under mu, read without it by outlived
	// labelled marks a request begun by WithLabels: other label calls on
	// contexts that share its Done channel begin requests of their own,
	// which are the same request (canon). Beside ended, in the word after
	// mu.
	labelled bool
	// borrowed marks a request that took a handle on another's record
	// (Record.HoldUnder): its end tells its trackers' borrow books. Under
	// mu, in the same word.
	borrowed bool
	done     <-chan struct{} // the context's: closed once the request is over
	// inFlight and tensors are what it holds in flight in all, beside
	// the sites, under mu: plain integers, so that the record path pays
	// nothing for them beyond the lock it takes anyway (an atomic store is
	// an exchange on amd64, two of which cost Record+Release a tenth).
	inFlight counter.Sum // exact past MaxInt64 (records near it add up), read held there
	tensors  int64

	parent *request  // the request it was begun under, for scopes
	sites  []reqSite // what is in flight, by site; starts in first
	more   map[*Site]*reqSite
	first  [1]reqSite

	// peak is the most it has held in flight, under mu.
	peak int64
	// labels are those of its record with the most labels (the first
	// such): what OpenRequests shows and what its kind is read from.
	// meta is its first record's with a Meta, for the device. Both under
	// mu.
	labels *labelSet
	meta   *Meta

	// canon is the request this one is the same as: the first request of
	// its Done channel that a tracker listed. nil while q is its own.
	canon atomic.Pointer[request]
	// entry is the request in the book of the first tracker it recorded
	// in; its also chain, in the books of the others (most requests know
	// one). Set under mu.
	entry bookEntry
	// afters are what AfterRequest arranged to run at its end, under mu.
	afters *requestAfter
}

// reqSite is what a request holds in flight at one site.
type reqSite struct {
	site  *Site
	bytes recordBytes // split as the site's sums are (wideRecord)
	count int64
}

// maxListedSites is how many sites a request lists before it indexes them
// by a map: most requests allocate from a handful of lines.
const maxListedSites = 16

// addLocked counts bytes and count (negative to take them back) in flight
// at site. Called with q.mu held.
func (q *request) addLocked(site *Site, bytes, count int64) {
	q.inFlight.Add(bytes)
	q.tensors += count
	q.peak = max(q.peak, q.inFlight.Load())
	if !q.entry.dirty {
		q.entry.queue() // the books learn of it at their next read
	}
	for e := q.entry.also; e != nil; e = e.also {
		e.queue()
	}
	for i := range q.sites {
		if e := &q.sites[i]; e.site == site {
			e.bytes.add(bytes)
			e.count += count
			return
		}
	}
	if e := q.more[site]; e != nil {
		e.bytes.add(bytes)
		e.count += count
		return
	}
	if len(q.sites) < maxListedSites {
		if q.sites == nil {
			q.sites = q.first[:0]
		}
		q.sites = append(q.sites, reqSite{site: site, count: count})
		q.sites[len(q.sites)-1].bytes.add(bytes)
		return
	}
	if q.more == nil {
		q.more = make(map[*Site]*reqSite)
	}
	e := &reqSite{site: site, count: count}
	e.bytes.add(bytes)
	q.more[site] = e
}

// isDone reports whether q's context is done: one non-blocking receive.
func (q *request) isDone() bool {
	select {
	case <-q.done:
		return true
	default:
		return false
	}
}

// within reports whether q is anc or was begun under it.
func (q *request) within(anc *request) bool {
	anc = anc.same()
	for ; q != nil; q = q.parent {
		if q.same() == anc {
			return true
		}
	}
	return false
}

// scopeKey is the context key of a scope.
type scopeKey struct{}

// scope is what a context carries for the tracker: its labels and its
// request, in one value so that recording reads the context once.
type scope struct {
	labels *labelSet
	req    *request
}

func scopeOf(ctx context.Context) scope {
	if ctx == nil {
		return scope{}
	}
	if c, ok := ctx.Value(scopeKey{}).(*scopeCtx); ok {
		return c.sc
	}
	return scope{}
}

// scopeCtx is a context carrying a scope: one allocation, where
// context.WithValue would take two (the context and the boxed scope).
type scopeCtx struct {
	context.Context
	sc scope
}

// withScope returns a context derived from parent that carries sc.
func withScope(parent context.Context, sc scope) context.Context {
	return &scopeCtx{Context: parent, sc: sc}
}

// Value returns the scope context itself for scopeKey, and defers every
// other key to its parent.
func (c *scopeCtx) Value(key any) any {
	if _, ok := key.(scopeKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// String names the context as the context package's do.
func (c *scopeCtx) String() string { return fmt.Sprintf("%v.WithValue(track scope)", c.Context) }

// WithRequest begins a request under ctx and returns its context and the
// function that ends it: every reader sees its end once the function has
// run. It also ends when ctx is done, seen as the end of a request begun
// by WithLabels is (Tracker.Totals says how soon). A tensor made under it and live at its end has
// outlived it (one made under no request, from birth); memory in flight is
// never judged. A request begun under another is part of it.
//
// Servers whose request contexts end with the request need only WithLabels;
// a worker taking jobs on one long-lived context begins a request per job:
// ctx, end := track.WithRequest(workerCtx); defer end().
func WithRequest(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(ctx)
	sc := scopeOf(ctx)
	q := &request{done: ctx.Done(), parent: sc.req}
	sc.req = q
	ctx = withScope(ctx, sc)
	return ctx, func() {
		// The end first: what AfterRequest arranged runs here, before the
		// cancel starts the context's AfterFuncs on goroutines of their own.
		q.endBy()
		cancel()
	}
}

// BeginRequest begins a request under ctx, labelled with kv (key, value
// pairs, as WithLabels takes them), and returns its context and the
// function that ends it: every reader sees its end once the function has
// run. Unlike WithRequest it derives no cancellable context: the request
// also ends when ctx is done, seen as the end of a request begun by
// WithLabels is (Tracker.Totals says how soon), and ctx stays the one
// whose cancel stops what the request started. It is for a server whose
// handler contexts end with the handler (net/http, gRPC): one allocation
// for the request, its labels and its context, one for its end.
func BeginRequest(ctx context.Context, kv ...string) (context.Context, func()) {
	if ctx == nil {
		ctx = context.Background()
	}
	sc := scopeOf(ctx)
	all := new(struct {
		q request
		l labelSet
		c scopeCtx
	})
	all.q.done, all.q.parent = ctx.Done(), sc.req
	sc.req = &all.q
	if len(kv) > 0 {
		sc.labels = Labels{set: sc.labels}.withInto(&all.l, kv).set
	}
	all.c = scopeCtx{Context: ctx, sc: sc}
	return &all.c, all.q.endBy
}

// join counts r, made under q, in flight, and returns the request r
// belongs to: q, or the request q is the same as (canon). A request that
// has already ended leaves r outlived at once. One whose context is done
// but whose end nobody has found yet (a goroutine it started still
// allocates) counts r in flight until then: join does not look at the
// context, a receive saved on every record, but for the record that lists
// q. q may be nil: r is then outlived from the start. The first record of
// q in t lists q in t's book; a request begun by WithLabels first asks
// the book for the request of its Done channel listed there, which it is
// the same as.
func (q *request) join(t *Tracker, r *Record) *request {
	if q == nil {
		r.word.Or(outlivedFlag)
		r.site.outlived(r.Bytes, 1)
		return nil
	}
	b := &t.requests
	if c := q.canon.Load(); c != nil {
		q = c
	}
	q.mu.Lock()
	if q.ended.Load() {
		q.mu.Unlock()
		r.site.outlived(r.Bytes, 1)
		return q
	}
	if q.entryIn(b) != nil {
		q.addLocked(r.site, r.Bytes, 1)
		q.noteLabels(r)
		q.mu.Unlock()
		return q
	}
	begun := q.entry.begun // when it was first listed, in another tracker
	if q.entry.book == nil {
		begun = t.unixAt(r.born) // the tracker's clock: r's birth
	}
	same, after := b.add(q, begun)
	if same != q {
		q.mu.Unlock()
		q.canon.CompareAndSwap(nil, same)
		return q.canon.Load().join(t, r) // same is listed in b: one more round at most
	}
	q.addLocked(r.site, r.Bytes, 1)
	q.noteLabels(r)
	q.mu.Unlock()
	after.finish()
	if q.isDone() { // listed after its context was done: a deadline past
		q.end()
	}
	return q
}

// entryIn returns q's entry in b, nil if b has none. Called with q.mu held.
func (q *request) entryIn(b *requestBook) *bookEntry {
	for e := &q.entry; e != nil; e = e.also {
		if e.book == b {
			return e
		}
	}
	return nil
}

// newEntry makes q's entry in b, queued dirty for the book to read once
// it is listed. Called with q.mu held.
func (q *request) newEntry(b *requestBook, begun int64) *bookEntry {
	e := &q.entry
	if e.book != nil {
		e = &bookEntry{also: q.entry.also}
		q.entry.also = e
	}
	e.q, e.book, e.at, e.heap, e.dirty = q, b, -1, -1, true
	e.begun = begun
	return e
}

// noteLabels keeps r's labels as q's when they are more than q's, and r's
// device when q has none. Called with q.mu held.
func (q *request) noteLabels(r *Record) {
	if l := r.labels.Load(); l != nil && (q.labels == nil || len(l.kv) > len(q.labels.kv)) {
		q.labels = l
	}
	if q.meta == nil {
		q.meta = r.Meta
	}
}

// device returns the device of q's first tensor. Called with q.mu held.
func (q *request) device() string {
	if q.meta == nil {
		return ""
	}
	return q.meta.Device
}

// same returns the request q is the same as, q itself if none.
func (q *request) same() *request {
	if q == nil {
		return nil
	}
	if c := q.canon.Load(); c != nil {
		return c
	}
	return q
}

// leave takes r out of its request's books for good, on release or hand
// over, and reports whether r had outlived it: its site then counts r as
// outlived. Called with r's shard lock held.
func (r *Record) leave() (outlived bool) {
	q := r.req
	if q == nil || r.word.Load()&handedFlag != 0 {
		return r.word.Load()&outlivedFlag != 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended.Load() {
		return true
	}
	q.addLocked(r.site, -r.Bytes, -1)
	return false
}

// rejoin counts r, back from its owner, under its request again: in flight
// if the request is open, outlived if it has ended or r has none. It
// returns whether r is outlived now. Called with r's shard lock held.
func (r *Record) rejoin() (outlived bool) {
	q := r.req
	if q == nil {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.ended.Load() && q.isDone() {
		q.endLocked()
	}
	if q.ended.Load() {
		return true
	}
	q.addLocked(r.site, r.Bytes, 1)
	return false
}

// end adds what q still holds in flight to its sites' outlived counters,
// once.
func (q *request) end() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.endLocked()
}

func (q *request) endLocked() {
	if q.ended.Load() {
		return
	}
	q.ended.Store(true)
	for i := range q.sites {
		if e := &q.sites[i]; e.count != 0 {
			e.site.outlivedAll(&e.bytes, e.count)
		}
	}
	if q.more != nil {
		for _, e := range q.more {
			if e.count != 0 {
				e.site.outlivedAll(&e.bytes, e.count)
			}
		}
	}
	q.sites, q.more = nil, nil
	for e := &q.entry; e != nil && e.book != nil; e = e.also {
		e.remove()
		t := e.book.tracker
		t.kinds.ended(t, q)
		if q.borrowed { // the handles it took and still holds outlive it (borrow.go)
			t.borrows.ended(q)
		}
	}
}

// outlived reports whether r outlived its request: a record made under no
// request, or handed to an owner without a bound, carries the flag; any
// other is outlived once its request has ended.
func (r *Record) outlived() bool {
	w := r.word.Load()
	if r.req == nil || w&handedFlag != 0 {
		return w&outlivedFlag != 0
	}
	return r.req.ended.Load()
}

// inFlight reports whether r is held in flight by its request: made under
// one that has not ended, and not handed to an owner.
func (r *Record) inFlight() bool {
	return r.req != nil && r.word.Load()&handedFlag == 0 && !r.req.ended.Load()
}

// outlivedNow is outlived for a reader about to show or judge r: it looks
// at the context of r's request, which it ends if it is done and nobody
// has yet, so that an exact reading sees a request begun by WithLabels end
// the moment its context is done. One receive per record in flight.
func (r *Record) outlivedNow() bool {
	if q := r.req; q != nil && r.word.Load()&handedFlag == 0 && !q.ended.Load() && q.isDone() {
		q.end()
	}
	return r.outlived()
}
