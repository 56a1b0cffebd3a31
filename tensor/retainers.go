package tensor

import (
	"sync"
	"weak"

	"github.com/tensorlife/tensorlife/track"
)

// Retainer search (track/tracktest's Retainers option) looks in a heap dump
// for what keeps a leaked tensor's handles alive. The tracker knows records,
// not handles, and a record never points at a handle (so that handles stay
// collectable); so, while search is on, this registry remembers each
// tracked handle weakly, by its record, for tracktest to resolve a leaked
// record to the handles to look for. It holds no handle alive, and a test
// that never asks for search pays one atomic load per handle made.

// handleShelf is one tracker's registry: the handles of each record, by
// record id, weakly. It is the tracker's own (track.Local) and goes with
// it. Entries whose handles are all freed or collected are swept when the
// map has doubled since the last sweep, so it stays proportional to the
// tensors live.
type handleShelf struct {
	mu      sync.Mutex
	m       map[uint64][]weak.Pointer[Tensor]
	sweepAt int
}

// handleShelves keeps each tracker's registry.
var handleShelves = track.NewLocal(func() *handleShelf {
	return &handleShelf{m: make(map[uint64][]weak.Pointer[Tensor])}
})

// handlesOf returns tr's registry; nil if tr keeps no room for it
// (track.ErrTooManyLocals), when its handles are not searched for.
func handlesOf(tr *track.Tracker) *handleShelf {
	h, err := handleShelves.Of(tr)
	if err != nil {
		return nil
	}
	tr.Books().FindHandlesWith(h)
	return h
}

// noteHandle registers t, a tracked handle just made. Callers check
// heapfence.RetainersOn first.
func noteHandle(t *Tensor) {
	b := t.blk()
	tr := b.tracker()
	if tr == nil {
		return
	}
	h := handlesOf(tr)
	if h == nil {
		return
	}
	id := b.ident()
	w := weak.Make(t)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.m[id] = append(h.m[id], w)
	if len(h.m) >= h.sweepAt {
		h.sweep()
		h.sweepAt = 2*len(h.m) + 1024
	}
}

// sweep drops the handles that are freed or collected. h.mu is held.
func (h *handleShelf) sweep() {
	for id, ws := range h.m {
		kept := ws[:0]
		for _, w := range ws {
			if t := w.Value(); t != nil && !t.Freed() {
				kept = append(kept, w)
			}
		}
		if len(kept) == 0 {
			delete(h.m, id)
			continue
		}
		clear(ws[len(kept):])
		h.m[id] = kept
	}
}

// LiveHandles returns the handles of the record id that are neither freed
// nor collected (track.HandleFinder). The handles returned are strong
// references: the caller pins them.
func (h *handleShelf) LiveHandles(id uint64) []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []any
	for _, w := range h.m[id] {
		if t := w.Value(); t != nil && !t.Freed() {
			out = append(out, t)
		}
	}
	return out
}
