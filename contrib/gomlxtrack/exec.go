package gomlxtrack

import (
	"context"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/tensorlife/tensorlife/track"
)

// Exec runs e as (*graph.Exec).Exec does, under ctx's request: its outputs,
// and the device copies it made of local tensors among args, are booked at
// the line that called Exec, with ctx's labels, as tensors of ctx's
// request (track.WithRequest): in flight while it is open, outlived if
// still live when it ends, counted in its kind's peaks, which admission
// reserves (pool.Admit). An output dropped without FinalizeAll is reported
// dropped at that line and, on a tracker that reclaims leaks, finalized.
//
// The values Exec converts to buffers for the call (Go values) are booked
// at that line too, until the program takes them. An e on a backend Wrap
// did not make runs untracked; a nil e is an error matching ErrNilExec.
// Exec is safe for concurrent use as e is.
//
//go:noinline
func Exec(ctx context.Context, e *graph.Exec, args ...any) ([]*tensors.Tensor, error) {
	if e == nil {
		return nil, ErrNilExec
	}
	// A local tensor gets a device copy of its own in the call, which
	// stays with it: booked under ctx like the outputs. (One that is
	// neither local nor on the device fails the call.)
	var localArr [8]*tensors.Tensor
	locals := localArr[:0]
	for _, a := range args {
		if t, ok := a.(*tensors.Tensor); ok && t != nil && !t.IsOnDevice(0) {
			locals = append(locals, t)
		}
	}
	outs, err := e.Exec(args...)
	if err != nil {
		return nil, err
	}
	for _, t := range outs {
		rebook(ctx, t)
	}
	for _, t := range locals {
		rebook(ctx, t)
	}
	clear(localArr[:])
	return outs, nil
}

// rebook books t's device buffer under ctx: a pending output at the line
// its program ran from, a buffer booked before under no request (made
// where Exec's frame was past the stack the tracker keeps, or a local
// tensor's copy) anew at the caller of its caller (Exec's).
//
//go:noinline
func rebook(ctx context.Context, t *tensors.Tensor) {
	bk, err := t.Backend()
	if err != nil {
		return
	}
	b, ok := bk.(*backend)
	if !ok {
		return // untracked
	}
	d, err := t.Device()
	if err != nil {
		return
	}
	buf, err := t.Buffer(b, d)
	if err != nil {
		return
	}
	s, err := b.own(buf, "Exec")
	if err != nil {
		return
	}
	switch cur := s.rec.Load(); cur {
	case nil:
		return // finalized
	case pending:
		if b.tr.Books().RecordAt(ctx, &s.own, s.site) != nil {
			return // only a misuse of a fresh record: never
		}
		b.live.add(s)
		if !s.rec.CompareAndSwap(pending, &s.own) {
			s.release(&s.own) // finalized meanwhile
		}
		return
	}
	r := &track.Record{Bytes: s.own.Bytes, Meta: s.own.Meta}
	if b.tr.Books().Record(ctx, r, 2) != nil {
		return // only a misuse of a fresh record: never
	}
	old := s.rec.Swap(r)
	if old == nil {
		old = r // finalized meanwhile: this record goes too
		s.rec.CompareAndSwap(r, nil)
	}
	_ = old.Release()
}
