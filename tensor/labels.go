package tensor

import (
	"fmt"
	"runtime"

	"github.com/tensorlife/tensorlife/track"
)

// SetLabels replaces the labels of the tensor's allocation record, shared
// by every handle of it: reports show it under l from then on. A cache
// that keeps a tensor for the long run calls it, so that the tensor is not
// shown as held by the request that made it. It does nothing for an
// untracked tensor, returns ErrFreed for a freed handle, and is safe for
// concurrent use.
func (t *Tensor) SetLabels(l track.Labels) error {
	if err := t.check(); err != nil {
		return err
	}
	tr := t.blk().tracker()
	if tr == nil {
		return nil
	}
	return t.blk().record().SetLabels(l)
}

// HandTo gives the tensor's allocation to owner through this handle: the
// owner keeps it past its request on purpose (track.Owner says how it is
// judged). A cache calls it on the handle it keeps, as mask.Cache does. The
// handle keeps the owner reachable, and the owner holds the allocation
// until this handle's Free, HandBack or drop, whatever other handles of
// the tensor do: two handles handed to two owners are held by both, each
// until it lets go. Then the allocation is its request's again, outlived
// if the request has ended. HandTo again on the same handle moves its hold
// to the new owner. A nil owner is an error matching track.ErrMisuse; a
// freed handle returns ErrFreed. It must not race with other calls on the
// same handle.
func (t *Tensor) HandTo(owner *track.Owner) error {
	if err := t.check(); err != nil {
		return err
	}
	tr := t.blk().tracker()
	if owner == nil {
		if tr != nil {
			return t.blk().record().HandOver(nil) // the misuse, counted as such
		}
		return fmt.Errorf("%w: tensor %d: HandTo a nil owner", track.ErrMisuse, t.ID())
	}
	x := t.ext
	if x == nil {
		x = &handleExt{}
		t.ext = x
	}
	if x.owner == owner {
		return nil // its owner already
	}
	if tr != nil {
		if x.owner != nil {
			if err := t.blk().record().HandBack(x.owner); err != nil {
				return err
			}
			x.owner = nil
		}
		if err := t.blk().record().HandOver(owner); err != nil {
			return err
		}
		t.watchDropWithCleanup()
		x.ticket.setOwner(owner)
		x.borrow.Return() // handed to an owner: not its request's any more
		x.borrow = nil
	}
	x.owner = owner
	return nil
}

// watchDropWithCleanup moves the report of the handle's drop from its
// finalizer to a cleanup, once (see handleExt.ticket).
func (t *Tensor) watchDropWithCleanup() {
	x := t.ext
	if x.ticket != nil {
		return
	}
	x.ticket = &dropTicket{b: t.b, site: t.site, how: t.how}
	runtime.SetFinalizer(t, nil)
	x.cleanup = runtime.AddCleanup(t, (*dropTicket).dropped, x.ticket)
}

// HandBack ends this handle's HandTo while the handle lives on: its owner
// lets go of the tensor without freeing it. When no other owner holds the
// allocation, it is its request's again, outlived if the request has
// ended. A handle that has handed nothing returns an error matching
// track.ErrMisuse, tracked or not; a freed one ErrFreed. It must not race
// with other calls on the same handle.
func (t *Tensor) HandBack() error {
	if err := t.check(); err != nil {
		return err
	}
	x := t.ext
	if x == nil || x.owner == nil {
		return fmt.Errorf("%w: tensor %d: HandBack without HandTo on this handle", track.ErrMisuse, t.ID())
	}
	owner := x.owner
	x.owner = nil
	if x.ticket != nil {
		x.ticket.setOwner(nil)
	}
	if tr := t.blk().tracker(); tr != nil {
		return t.blk().record().HandBack(owner)
	}
	return nil
}
