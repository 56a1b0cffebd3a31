package tensor

import (
	"fmt"

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
	return tr.SetLabels(&t.blk().rec, l)
}

// HandTo gives the tensor's allocation, for every handle of it, to owner,
// which keeps it past its request on purpose (track.Owner says how it is
// judged). A cache calls it on the handle it keeps, as mask.Cache does. The
// hand-over lasts until that handle's Free, HandBack or drop; then the
// allocation is its request's again, outlived if the request has ended.
// HandTo again moves it to the new owner. It does nothing for an untracked
// tensor, returns ErrFreed for a freed handle, and must not race with
// other calls on the same handle.
func (t *Tensor) HandTo(owner *track.Owner) error {
	if err := t.check(); err != nil {
		return err
	}
	tr := t.blk().tracker()
	if tr == nil {
		return nil
	}
	if owner == nil {
		return tr.HandOver(&t.blk().rec, nil) // the misuse, reported as such
	}
	if t.handing {
		if err := tr.HandBack(&t.blk().rec); err != nil {
			return err
		}
		t.handing = false
	}
	if err := tr.HandOver(&t.blk().rec, owner); err != nil {
		return err
	}
	t.handing = true
	return nil
}

// HandBack ends this handle's HandTo while the handle lives on: the owner
// lets go of the tensor without freeing it. The allocation is its
// request's again, outlived if the request has ended. A handle that has not
// handed anything returns an error matching track.ErrMisuse; a freed one
// ErrFreed. It must not race with other calls on the same handle.
func (t *Tensor) HandBack() error {
	if err := t.check(); err != nil {
		return err
	}
	tr := t.blk().tracker()
	if tr == nil {
		return nil
	}
	if !t.handing {
		return fmt.Errorf("%w: tensor %d: HandBack without HandTo on this handle", track.ErrMisuse, t.ID())
	}
	t.handing = false
	return tr.HandBack(&t.blk().rec)
}
