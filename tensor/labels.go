package tensor

import (
	"fmt"

	"github.com/tensorlife/tensorlife/track"
)

// SetLabels replaces the labels of the tensor's allocation record, which
// every handle of the tensor (Retain, View) shares: profiles, snapshots
// and reports show it under l from then on. An owner that adopts a tensor
// for the long run, such as a cache, calls it so that the tensor is not
// shown as held by the request that happened to make it. An untracked
// tensor has no labels to set: SetLabels does nothing. A freed handle
// returns ErrFreed. Safe for concurrent use.
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

// HandTo gives the tensor's allocation to owner, for every handle of it: it
// was kept past the request that made it on purpose (track.Owner says how
// it is judged from then on: never, for an owner with a byte bound). A
// cache that keeps a tensor calls it on the handle it keeps, as a
// mask.Cache does. The hand-over lasts as long as that handle: its Free
// (an eviction, a Close), its HandBack, or its drop gives the allocation
// back, and a handle a request still holds makes it that request's again,
// outlived if the request has ended. HandTo on a handle that has handed
// already moves the allocation to owner. An untracked tensor has nothing to
// hand over: HandTo does nothing. A freed handle returns ErrFreed. Like
// Free, it must not race with other calls on the same handle.
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
