package tensor

import "github.com/tensorlife/tensorlife/track"

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
// cache that keeps a tensor calls it, as a mask.Cache does. An untracked
// tensor has nothing to hand over: HandTo does nothing. A freed handle
// returns ErrFreed. Safe for concurrent use.
func (t *Tensor) HandTo(owner *track.Owner) error {
	if err := t.check(); err != nil {
		return err
	}
	tr := t.blk().tracker()
	if tr == nil {
		return nil
	}
	return tr.HandOver(&t.blk().rec, owner)
}
