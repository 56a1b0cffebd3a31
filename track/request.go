package track

import (
	"context"
	"sync"
	"sync/atomic"
)

// A request is one unit of a service's work, begun by WithRequest or by the
// first WithLabels on a context that can end, and ended with that context.
// It counts, per site, the live bytes made under it and not yet released
// or handed over; its end adds them to the sites' outlived counters, O(1)
// per site (at most one per tensor it still holds), with no walk of the live
// set and no clock. A record made under it is outlived from then on: the
// record need not be touched, as outlived() reads the request's end.
//
// Lock order: a shard's lock, then a request's; the request's lock is never
// held while a shard's is taken.
type request struct {
	mu    sync.Mutex
	ended atomic.Bool // set under mu, read without it by outlived
	sites []reqSite   // what is in flight, by site
	more  map[*Site]*reqSite
}

// reqSite is what a request holds in flight at one site.
type reqSite struct {
	site         *Site
	bytes, count int64
}

// maxListedSites is how many sites a request lists before it indexes them
// by a map: most requests allocate from a handful of lines.
const maxListedSites = 16

// addLocked counts bytes and count (negative to take them back) in flight
// at site. Called with q.mu held.
func (q *request) addLocked(site *Site, bytes, count int64) {
	for i := range q.sites {
		if e := &q.sites[i]; e.site == site {
			e.bytes += bytes
			e.count += count
			return
		}
	}
	if e := q.more[site]; e != nil {
		e.bytes += bytes
		e.count += count
		return
	}
	if len(q.sites) < maxListedSites {
		q.sites = append(q.sites, reqSite{site: site, bytes: bytes, count: count})
		return
	}
	if q.more == nil {
		q.more = make(map[*Site]*reqSite)
	}
	q.more[site] = &reqSite{site: site, bytes: bytes, count: count}
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
	sc, _ := ctx.Value(scopeKey{}).(scope)
	return sc
}

// WithRequest begins a request under ctx and returns its context and the
// function that ends it (it also ends with ctx). A tensor made under it and
// live at its end has outlived it: what a watcher judges. Memory in flight
// is never judged. Servers whose request contexts end with the request need
// only WithLabels. Tensors made under no request count as outlived from birth.
func WithRequest(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(ctx)
	sc := scopeOf(ctx)
	sc.req = &request{}
	stop := context.AfterFunc(ctx, sc.req.end)
	ctx = context.WithValue(ctx, scopeKey{}, sc)
	return ctx, func() {
		stop()
		cancel()
		sc.req.end()
	}
}

// join counts r, made under q, in flight; a request that has already ended
// (a goroutine it started that still allocates) leaves r outlived at once.
// q may be nil: r is then outlived from the start.
func (q *request) join(r *Record) {
	if q != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
		if !q.ended.Load() {
			q.addLocked(r.site, r.Bytes, 1)
			return
		}
	} else {
		r.word.Or(outlivedFlag)
	}
	r.site.outlived(r.Bytes, 1)
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

// end adds what q still holds in flight to its sites' outlived counters,
// once.
func (q *request) end() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended.Load() {
		return
	}
	q.ended.Store(true)
	for _, e := range q.sites {
		if e.count != 0 {
			e.site.outlived(e.bytes, e.count)
		}
	}
	for _, e := range q.more {
		if e.count != 0 {
			e.site.outlived(e.bytes, e.count)
		}
	}
	q.sites, q.more = nil, nil
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

// Owner holds tensors past their request on purpose (HandOver): a cache, a
// session store. With MaxBytes > 0 it is never judged; without, it is judged
// by its growth, so an unbounded cache is still found.
type Owner struct {
	Name     string
	MaxBytes int64 // the owner's byte budget; 0 if it has none
}

// HandOver gives the live record r to o: r no longer outlives its request.
// A nil o, or r not live through t, is an error matching ErrMisuse.
func (t *Tracker) HandOver(r *Record, o *Owner) error {
	if err := t.owns(r, "handed over"); err != nil {
		return err
	}
	if o == nil {
		return errNilOwner
	}
	sh := &t.shards[r.id%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r.state() != stateLive {
		t.misuse.Add(1)
		return errReleased(r, "handed over")
	}
	was := r.leave() // no longer in flight: its owner has it now
	r.holderSet().setOwner(o)
	now := o.MaxBytes <= 0
	if now {
		r.word.Or(handedFlag | outlivedFlag)
	} else {
		r.word.Or(handedFlag)
		r.word.And(^uint32(outlivedFlag))
	}
	switch {
	case was && !now:
		r.site.outlived(-r.Bytes, -1)
	case !was && now:
		r.site.outlived(r.Bytes, 1)
	}
	return nil
}
