package pool

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// AdmitHistory is how many ended requests of a kind, on the pool's device,
// Admit needs before it trusts the kind's learned peak (AdmitSized: ended
// requests with a size); with fewer it reserves the fallback the caller
// states.
const AdmitHistory = 20

// Admission is one admitted request's reservation on a pool. Its exported
// fields are set by Admit and read-only after; End and Left are safe for
// concurrent use.
type Admission struct {
	// Kind is the request kind it was admitted as, cut to MaxKindBytes.
	Kind string
	// Units is the request's size as AdmitSized stated it; 0 from Admit.
	Units int64
	// Reserved is the bytes reserved: what the kind's history says a
	// request of its size holds at its peak, or the fallback.
	Reserved int64
	// Requests counts the ended requests of the kind the reservation was
	// read from.
	Requests int64
	// Fallback says the kind had too little history and Reserved is the
	// caller's fallback: fewer than AdmitHistory ended requests (with a
	// size, for AdmitSized), or a size larger than any of theirs.
	Fallback bool

	pool *Pool
	kind *admitKind
	done <-chan struct{}
	// left is the reservation not drawn; ended (-1) once released.
	left atomic.Int64
	// used is the bytes of the blocks handed out under it and not
	// released, peak the most it reached: what its kind's next
	// reservations are sized by (admitkinds.go).
	used, peak atomic.Int64
	// flags says it ran out of memory or went past its reservation.
	flags atomic.Uint32
	stop  func() bool // stops the track.AfterRequest that ends it
}

// ended marks an admission's left once its reservation is released.
const ended = -1

// Admission flags: what raises its kind's reservations.
const (
	ranOutFlag = 1 << iota
	pastFlag
)

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
// Tracker.KindOf(track.LabelsFrom(ctx))) before it makes any tensor, with
// no stated size: it reserves the kind's p99 peak against the budget, in
// the pool's rounded bytes: that of the kind's last admitted requests on
// this pool once AdmitHistory of them have ended, else the tracker's p99 on
// the pool's device (rounded up as the pool rounds one block of that size)
// once AdmitHistory requests of the kind have ended there, else fallback
// bytes as stated (say the largest request the service allows, in rounded
// bytes); Admission.Fallback says the last. A service that knows each
// request's size before it starts (its prompt and the tokens it may
// generate) calls AdmitSized instead.
//
// The reservation counts against the budget at once, so a burst of
// admissions sees the ones admitted before it. Tensors made from the pool
// under the returned context (or one derived from it) draw their blocks
// from the reservation first and from the free budget past it; a block
// freed while the request is open goes back to the reservation. The
// reservation is released by End, at once: every later Admit, allocation,
// Headroom and Stats sees it. The end of ctx's request releases it too
// (track.AfterRequest): at once, on the ending goroutine, for a request
// begun by track.WithRequest, track.BeginRequest or track/httptrack whose
// end function runs; for a context that is done otherwise, at once for the
// admission's own next allocation, which checks its context, and for every
// other reader one goroutine's scheduling after the context's end. A server
// whose requests track/httptrack begins needs no End; any other ends each
// admission itself (defer adm.End(), or End before it writes its answer). Blocks still held at the release stay allocated and
// count as any others.
//
// When the budget cannot hold the reservation, after the cache is returned
// to the device (when that makes room), Admit returns an *AdmissionError
// matching ErrAdmissionRefused. Without a budget it returns an error
// matching ErrNoBudget, after Close one matching tensor.ErrClosed, for a
// negative fallback one matching tensor.ErrInvalidSize. Admitted or
// refused, it costs a map lookup in the pool's and the tracker's kind
// tables, a few atomic operations and two short locks, whatever the open
// admissions, and an admission registers one track.AfterRequest on ctx,
// which End stops.
func (p *Pool) Admit(ctx context.Context, kind string, fallback int64) (context.Context, *Admission, error) {
	return p.admit(ctx, kind, 0, fallback)
}

// AdmitSized is Admit for a request whose size the service knows before it
// starts, in units it chooses, the larger the more memory: the tokens it
// holds (prompt plus the most it may generate, times the sequences it
// decodes together), the bytes of its input. Each kind learns, from its
// admitted requests with a size that ended on this pool, the line base +
// perUnit × units above their peaks (in the pool's rounded bytes), and
// reserves it for this request's units. It reserves fallback instead, the
// bytes the caller states for a request of this size with no history (say
// the service's worst case for it), while fewer than AdmitHistory requests
// of the kind with a size have ended, or when units is larger than any of
// the last 64 of theirs: a size the kind never showed is not guessed at.
//
// A kind whose admitted request ran out of memory, or held more than its
// reservation, raises its reservations at once (as Kubernetes' vertical pod
// autoscaler raises its recommendation after an out-of-memory kill): ×2 or
// ×1.5, to at most 8×, never past the fallback unless the history alone
// says more; each request that ends within its reservation lowers the
// raise by a sixteenth, and a lower fit is followed by a sixteenth of the
// difference per ended request. Stats.AdmissionKinds shows what each kind
// learned.
//
// units must be positive: an error matching tensor.ErrInvalidSize
// otherwise. The rest is Admit's.
func (p *Pool) AdmitSized(ctx context.Context, kind string, units, fallback int64) (context.Context, *Admission, error) {
	if units <= 0 {
		if ctx == nil {
			ctx = context.Background()
		}
		return ctx, nil, fmt.Errorf("%w: admission of %d units", tensor.ErrInvalidSize, units)
	}
	return p.admit(ctx, kind, units, fallback)
}

func (p *Pool) admit(ctx context.Context, kind string, units, fallback int64) (context.Context, *Admission, error) {
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
	kind = cutKind(kind)
	k := p.admKinds.kind(kind)
	a := &Admission{Kind: kind, Units: units, pool: p, kind: k, done: ctx.Done()}
	want, requests, isFallback := k.reservation(units, fallback)
	if isFallback && units == 0 && p.tracker != nil {
		if kp, ok := p.tracker.Books().RequestPeak(kind, p.name); ok {
			requests = kp.Requests
			if kp.Requests >= AdmitHistory {
				want, isFallback = roundedBytes(kp.PeakP99), false
			}
		}
	}
	a.Reserved, a.Requests, a.Fallback = want, requests, isFallback
	if !p.reserve(want) {
		if want <= p.budget-p.activeBytes()-p.promised.Load() && p.reserved.Load() > p.activeBytes() {
			p.evictions.Add(p.releaseCache()) // the cache is in the way
		}
		if !p.reserve(want) {
			k.refused.Add(1)
			return ctx, nil, &AdmissionError{Kind: kind, Device: p.name, Units: units, Peak: want, Fallback: isFallback,
				Headroom: max(p.budget-p.activeBytes()-p.promised.Load(), 0), Budget: p.budget, Open: p.admissions.Load()}
		}
	}
	a.left.Store(want)
	p.promised.Add(want)
	p.reservations.Add(want)
	p.admissions.Add(1)
	k.admitted.Add(1)
	k.open.Add(1)
	k.reserved.Add(want)
	a.stop = track.AfterRequest(ctx, a.release)
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

// End releases what the admission has not drawn of its reservation, at
// once: the next Admit, allocation, Headroom and Stats see it. The blocks
// it drew stay allocated and go back to the pool as any others. It is
// idempotent; the context's end calls it too.
func (a *Admission) End() {
	a.release()
	a.stop()
}

// release releases the reservation once: what End does, less stopping
// the track.AfterRequest (which calls it).
func (a *Admission) release() {
	left := a.left.Swap(ended)
	if left == ended {
		return
	}
	p := a.pool
	p.promised.Add(-left)
	p.committed.Add(-left)
	p.reservations.Add(-a.Reserved)
	p.admissions.Add(-1)
	a.kind.ended(a)
}

// open reports whether a is still open, releasing it first if its
// context is done: an allocation under an admission sees its end at once.
func (a *Admission) open() bool {
	if a.left.Load() == ended {
		return false
	}
	select {
	case <-a.done:
		a.release()
		return false
	default:
		return true
	}
}

// use counts size bytes handed out under a; one that takes a past its
// reservation while it is open raises its kind's reservations.
func (a *Admission) use(size int64) {
	n := a.used.Add(size)
	for {
		pk := a.peak.Load()
		if n <= pk || a.peak.CompareAndSwap(pk, n) {
			break
		}
	}
	if n > a.Reserved && a.left.Load() != ended {
		a.mark(pastFlag)
	}
}

// ranOut notes that an allocation under a, while open, ran out of memory.
func (a *Admission) ranOut() {
	if a.left.Load() != ended {
		a.mark(ranOutFlag)
	}
}

// mark sets flag on a, and the first time raises a's kind at once.
func (a *Admission) mark(flag uint32) {
	for {
		f := a.flags.Load()
		if f&flag != 0 {
			return
		}
		if a.flags.CompareAndSwap(f, f|flag) {
			break
		}
	}
	if flag == ranOutFlag {
		a.kind.ranOut.Add(1)
		a.kind.raise(2)
	} else {
		a.kind.past.Add(1)
		a.kind.raise(1.5)
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

// refill returns d bytes drawn by a block now gone back to the device to
// a's reservation, if a is still open: the request may draw them again.
// The budget counts them first, so no reader sees them counted nowhere.
func (p *Pool) refill(a *Admission, d int64) {
	if a == nil || d == 0 {
		return
	}
	p.committed.Add(d)
	p.refillCounted(a, d)
}

// refillCounted moves d bytes that committed counts already into a's
// reservation, or out of committed if a has ended.
func (p *Pool) refillCounted(a *Admission, d int64) {
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

// refillBeside returns d bytes drawn by a block being released, which
// would stay cached, to a's reservation if the budget holds both the
// cached block and the promise, and reports whether it did (or had
// nothing to do). If not, the block must go back to the device first: a
// block that stays cached is held from the device, and its bytes promised
// again would count twice against the budget.
func (p *Pool) refillBeside(a *Admission, d int64) bool {
	if a == nil || d == 0 || a.left.Load() == ended {
		return true
	}
	if !p.reserve(d) {
		return false
	}
	p.refillCounted(a, d)
	return true
}
