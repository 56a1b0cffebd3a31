package track

import (
	"context"
	"sync"
)

// A request is one unit of a service's work, begun by WithRequest or by the
// first WithLabels on a context that can end, and ended with that context.
// It links the live records made under it, so that its end flags those
// still live as outlived, O(1) each, and adds their bytes to their sites'
// outlived counters: no walk of the live set, no clock.
//
// Lock order: a shard's lock, then a request's; the request's lock is never
// held while a shard's is taken.
type request struct {
	mu    sync.Mutex
	head  *Record // live records made under it and not handed over
	ended bool
}

func newRequest() *request { return &request{} }

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
	sc.req = newRequest()
	stop := context.AfterFunc(ctx, sc.req.end)
	ctx = context.WithValue(ctx, scopeKey{}, sc)
	return ctx, func() {
		stop()
		cancel()
		sc.req.end()
	}
}

// join links r, made under q, into q's list; a request that has already
// ended (a goroutine it started that still allocates) leaves r outlived at
// once. q may be nil: r is then outlived from the start.
func (q *request) join(r *Record) {
	if q != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
		if !q.ended {
			r.reqNext = q.head
			if q.head != nil {
				q.head.reqPrev = r
			}
			q.head = r
			return
		}
	}
	r.setOutlived()
}

// unlinkLocked takes r out of q's list if it is there: q has not ended and
// r was neither handed over nor made after q ended. Called with q.mu held.
func (q *request) unlinkLocked(r *Record) {
	if q.ended || r.word.Load()&(handedFlag|outlivedFlag) != 0 {
		return
	}
	if r.reqPrev != nil {
		r.reqPrev.reqNext = r.reqNext
	} else {
		q.head = r.reqNext
	}
	if r.reqNext != nil {
		r.reqNext.reqPrev = r.reqPrev
	}
	r.reqPrev, r.reqNext = nil, nil
}

// leave takes r out of its request for good, on release, and reports
// whether r had outlived it: its site then counts r as outlived. Called
// with r's shard lock held.
func (r *Record) leave() (outlived bool) {
	if q := r.req; q != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.unlinkLocked(r)
	}
	return r.word.Load()&outlivedFlag != 0
}

// end flags every record still linked to q outlived, once.
func (q *request) end() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return
	}
	q.ended = true
	for r := q.head; r != nil; {
		next := r.reqNext
		r.reqPrev, r.reqNext = nil, nil
		r.setOutlived()
		r = next
	}
	q.head = nil
}

// setOutlived flags r outlived and counts it at its site.
func (r *Record) setOutlived() {
	r.word.Or(outlivedFlag)
	r.site.outlived(r.Bytes, 1)
}

// unsetOutlived undoes setOutlived.
func (r *Record) unsetOutlived() {
	r.word.And(^uint32(outlivedFlag))
	r.site.outlived(-r.Bytes, -1)
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
	if q := r.req; q != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.unlinkLocked(r)
	}
	r.word.Or(handedFlag)
	r.owner = o
	switch out := r.word.Load()&outlivedFlag != 0; {
	case o.MaxBytes > 0 && out:
		r.unsetOutlived()
	case o.MaxBytes <= 0 && !out:
		r.setOutlived()
	}
	return nil
}
