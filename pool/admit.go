package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/tensor"
)

// ErrAdmissionRefused means Admit found too little of the budget left for
// the request's reservation: the *AdmissionError that matches it names the
// kind, its peak and the headroom. Nothing was allocated; a server answers
// at once (503 with Retry-After) instead of running out of memory midway.
var ErrAdmissionRefused = errors.New("pool: admission refused")

// ErrNoBudget means Admit was called on a pool without a budget: there is
// nothing to reserve against.
var ErrNoBudget = errors.New("pool: admission needs a budget")

// AdmitHistory is how many ended requests of a kind, on the pool's device,
// Admit needs before it trusts the kind's p99 peak; with fewer it reserves
// the fallback the caller states.
const AdmitHistory = 20

// AdmissionError is a refused admission: the request's kind, the bytes
// its reservation needed (its kind's p99 peak in the pool's rounded
// bytes, or the caller's fallback), and what the budget had left for it.
// It matches ErrAdmissionRefused.
type AdmissionError struct {
	// Kind is the request kind asked for.
	Kind string
	// Device is the pool's device.
	Device string
	// Peak is the reservation the request needed: its kind's p99 peak,
	// rounded as the pool rounds a block of that size, or with too little
	// history the fallback.
	Peak int64
	// Fallback says Peak is the caller's fallback: the kind had fewer than
	// AdmitHistory ended requests.
	Fallback bool
	// Headroom is what the budget had left for a reservation: the budget
	// less active bytes and the reservations of open admissions.
	Headroom int64
	// Budget is the pool's budget.
	Budget int64
	// Open counts the admissions open when it was refused.
	Open int64
}

func (e *AdmissionError) Error() string {
	what := "p99 peak"
	if e.Fallback {
		what = "fallback reservation (too little history)"
	}
	return fmt.Sprintf("pool: admission refused on %s: kind %q needs its %s of %s, headroom %s of budget %s (%d admitted requests open)",
		e.Device, e.Kind, what, format.Bytes(e.Peak), format.Bytes(e.Headroom), format.Bytes(e.Budget), e.Open)
}

// Unwrap makes the error match ErrAdmissionRefused.
func (e *AdmissionError) Unwrap() error { return ErrAdmissionRefused }

// Admission is one admitted request's reservation on a pool. Its exported
// fields are set by Admit and read-only after; End and Left are safe for
// concurrent use.
type Admission struct {
	// Kind is the request kind it was admitted as.
	Kind string
	// Reserved is the bytes reserved: the kind's p99 peak, or the fallback.
	Reserved int64
	// Requests counts the ended requests of the kind the peak was read
	// from.
	Requests int64
	// Fallback says the kind had too little history (fewer than
	// AdmitHistory ended requests) and Reserved is the caller's fallback.
	Fallback bool

	pool *Pool
	done <-chan struct{}
	// left is the reservation not drawn; ended (-1) once released.
	left atomic.Int64
	// used is the bytes of the blocks handed out under it and not
	// released, peak the most it reached: what its kind's next
	// reservations are sized by (admitpeaks.go).
	used, peak atomic.Int64
	stop       func() bool // stops the context.AfterFunc that ends it

	// In the pool's list of open admissions, under its lock.
	prev, next *Admission
}

// ended marks an admission's left once its reservation is released.
const ended = -1

// admissionKey finds a pool's admission in a context.
type admissionKey struct{ p *Pool }

// admissionOf returns the admission of p in ctx, or nil.
func admissionOf(ctx context.Context, p *Pool) *Admission {
	if ctx == nil {
		return nil
	}
	a, _ := ctx.Value(admissionKey{p}).(*Admission)
	return a
}

// Admit admits a request of kind (as the tracker names it:
// Tracker.KindOf(track.LabelsFrom(ctx))) before it makes any tensor. It
// reserves the kind's p99 peak against the budget, in the pool's rounded
// bytes: that of the kind's last admitted requests on this pool once
// AdmitHistory of them have ended, else the tracker's p99 on the pool's
// device (rounded up as the pool rounds one block of that size) once
// AdmitHistory requests of the kind have ended there, else fallback bytes
// as stated (say the largest request the service allows, in rounded
// bytes); Admission.Fallback says the last. The
// reservation counts against the budget at once, so a burst of admissions
// sees the ones admitted before it.
//
// Tensors made from the pool under the returned context (or one derived
// from it) draw their blocks from the reservation first and from the free
// budget past it; a block freed while the request is open goes back to the
// reservation. The reservation is released when ctx is done or End is
// called, whichever comes first; blocks still held then stay allocated and
// count as any others.
//
// When the budget cannot hold the reservation, after the admissions whose
// contexts are done are released and the cache is returned to the device
// (when that makes room), Admit returns an *AdmissionError matching
// ErrAdmissionRefused. Without a budget it returns an error matching
// ErrNoBudget, after Close one matching tensor.ErrClosed. It costs a map
// lookup in the pool's and the tracker's kind tables, a few atomic
// operations and one short lock, whatever the open requests, and
// registers one context.AfterFunc on ctx, which End stops.
func (p *Pool) Admit(ctx context.Context, kind string, fallback int64) (context.Context, *Admission, error) {
	if ctx == nil {
		ctx = context.Background() // as WithLabels and WithRequest take one
	}
	switch {
	case p.closed.Load():
		return ctx, nil, fmt.Errorf("%w: pool on %s", tensor.ErrClosed, p.name)
	case p.budget == 0:
		return ctx, nil, fmt.Errorf("%w: pool on %s", ErrNoBudget, p.name)
	case fallback < 0:
		return ctx, nil, fmt.Errorf("%w: admission fallback %d bytes", tensor.ErrInvalidSize, fallback)
	}
	a := &Admission{Kind: kind, pool: p, done: ctx.Done()}
	want, fromHistory := fallback, false
	if p99, n := p.admPeaks.peak(kind); n >= AdmitHistory {
		want, fromHistory, a.Requests = p99, true, n
	} else if p.tracker != nil {
		if kp, ok := p.tracker.RequestPeak(kind, p.name); ok {
			a.Requests = kp.Requests
			if kp.Requests >= AdmitHistory {
				want, fromHistory = roundedBytes(kp.PeakP99), true
			}
		}
	}
	a.Fallback = !fromHistory
	a.Reserved = want
	if !p.reserve(want) {
		p.settleAdmissions()
		if want <= p.budget-p.activeBytes()-p.promised.Load() && p.reserved.Load() > p.activeBytes() {
			p.evictions.Add(p.releaseCache()) // the cache is in the way
		}
		if !p.reserve(want) {
			return ctx, nil, &AdmissionError{Kind: kind, Device: p.name, Peak: want, Fallback: a.Fallback,
				Headroom: max(p.budget-p.activeBytes()-p.promised.Load(), 0), Budget: p.budget, Open: p.admissions.Load()}
		}
	}
	a.left.Store(want)
	p.promised.Add(want)
	p.admissions.Add(1)
	p.openAdm.add(a)
	a.stop = context.AfterFunc(ctx, a.release)
	return context.WithValue(ctx, admissionKey{p}, a), a, nil
}

// roundedBytes rounds n up as the pool rounds a block of n bytes.
func roundedBytes(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if _, size, ok := classOf(n); ok {
		return size
	}
	return n
}

// reserve counts n bytes against the budget, if they fit.
func (p *Pool) reserve(n int64) bool {
	for {
		r := p.committed.Load()
		if n > p.budget-r {
			return false
		}
		if p.committed.CompareAndSwap(r, r+n) {
			return true
		}
	}
}

// End releases what the admission has not drawn of its reservation; the
// blocks it drew stay allocated and go back to the pool as any others. It
// is idempotent; the context's end calls it too.
func (a *Admission) End() {
	a.release()
	a.stop()
}

// release releases the reservation once: what End does, less stopping
// the context.AfterFunc (which calls it, as settleAdmissions does).
func (a *Admission) release() {
	left := a.left.Swap(ended)
	if left == ended {
		return
	}
	p := a.pool
	p.promised.Add(-left)
	p.committed.Add(-left)
	p.admissions.Add(-1)
	p.openAdm.remove(a)
	p.admPeaks.ended(a.Kind, a.peak.Load())
}

// use counts size bytes handed out under a.
func (a *Admission) use(size int64) {
	n := a.used.Add(size)
	for {
		pk := a.peak.Load()
		if n <= pk || a.peak.CompareAndSwap(pk, n) {
			return
		}
	}
}

// Left returns the bytes of the reservation not drawn yet; 0 once ended.
func (a *Admission) Left() int64 { return max(a.left.Load(), 0) }

// draw takes up to size bytes from a's reservation and returns them; 0
// once it has ended. The pool's committed bytes count them already.
func (a *Admission) draw(size int64) int64 {
	for {
		l := a.left.Load()
		if l <= 0 {
			return 0
		}
		d := min(l, size)
		if a.left.CompareAndSwap(l, l-d) {
			return d
		}
	}
}

// drawHit draws for a cache hit of size bytes: the block is counted in
// committed already, so what it draws leaves the promise.
func (p *Pool) drawHit(a *Admission, size int64) int64 {
	d := a.draw(size)
	if d > 0 {
		p.promised.Add(-d)
		p.committed.Add(-d)
	}
	return d
}

// undraw gives back d bytes drawn for an allocation that failed: still
// promised, they return to a's reservation, or leave the budget if a has
// ended meanwhile.
func (p *Pool) undraw(a *Admission, d int64) {
	if a == nil || d == 0 {
		return
	}
	for {
		l := a.left.Load()
		if l == ended {
			p.promised.Add(-d)
			p.committed.Add(-d)
			return
		}
		if a.left.CompareAndSwap(l, l+d) {
			return
		}
	}
}

// refill returns d bytes drawn by a block now released to a's
// reservation, if a is still open: the request may draw them again. The
// budget counts them first, so no reader sees them counted nowhere.
func (p *Pool) refill(a *Admission, d int64) {
	if a == nil || d == 0 {
		return
	}
	p.committed.Add(d)
	for {
		l := a.left.Load()
		if l == ended {
			p.committed.Add(-d)
			return
		}
		if a.left.CompareAndSwap(l, l+d) {
			p.promised.Add(d)
			return
		}
	}
}

// settleAdmissions ends the open admissions whose contexts are done but
// whose context.AfterFunc has not run yet: a refusal counts only requests
// that are open. O(open admissions), on the refusal path only.
func (p *Pool) settleAdmissions() {
	for _, a := range p.openAdm.over() {
		a.release()
	}
}

// admissionList is a pool's open admissions, linked, under one lock:
// taken once when a request is admitted and once when it ends.
type admissionList struct {
	mu   sync.Mutex
	head *Admission
}

func (l *admissionList) add(a *Admission) {
	l.mu.Lock()
	a.next = l.head
	if l.head != nil {
		l.head.prev = a
	}
	l.head = a
	l.mu.Unlock()
}

func (l *admissionList) remove(a *Admission) {
	l.mu.Lock()
	if a.prev != nil {
		a.prev.next = a.next
	} else if l.head == a {
		l.head = a.next
	}
	if a.next != nil {
		a.next.prev = a.prev
	}
	a.prev, a.next = nil, nil
	l.mu.Unlock()
}

// over returns the listed admissions whose contexts are done.
func (l *admissionList) over() []*Admission {
	var out []*Admission
	l.mu.Lock()
	for a := l.head; a != nil; a = a.next {
		select {
		case <-a.done:
			out = append(out, a)
		default:
		}
	}
	l.mu.Unlock()
	return out
}
