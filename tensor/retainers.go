package tensor

import (
	"sync"
	"weak"

	"github.com/tensorlife/tensorlife/internal/retainhook"
	"github.com/tensorlife/tensorlife/track"
)

// Retainer search (track/tracktest's Retainers option) looks in a heap dump
// for what keeps a leaked tensor's handles alive. The tracker knows records,
// not handles, and a record never points at a handle (so that handles stay
// collectable); so, while search is on, this registry remembers each
// tracked handle weakly, by its record, for tracktest to resolve a leaked
// record to the handles to look for. It holds no handle alive, and a test
// that never asks for search pays one atomic load per handle made.

// handleKey names a record: its tracker, weakly, and its id.
type handleKey struct {
	tr weak.Pointer[track.Tracker]
	id uint64
}

// handles is the registry. Entries whose handles are all freed or
// collected are swept when the map has doubled since the last sweep, so it
// stays proportional to the tensors live.
var handles struct {
	mu      sync.Mutex
	m       map[handleKey][]weak.Pointer[Tensor]
	sweepAt int
}

func init() { retainhook.SetLookup(liveHandles) }

// noteHandle registers t, a tracked handle just made. Callers check
// retainhook.On first.
func noteHandle(t *Tensor) {
	b := t.blk()
	tr := b.tracker()
	if tr == nil {
		return
	}
	k := handleKey{tr: weak.Make(tr), id: b.rec.ID()}
	w := weak.Make(t)
	handles.mu.Lock()
	defer handles.mu.Unlock()
	if handles.m == nil {
		handles.m = make(map[handleKey][]weak.Pointer[Tensor])
	}
	handles.m[k] = append(handles.m[k], w)
	if len(handles.m) >= handles.sweepAt {
		sweepHandles()
		handles.sweepAt = 2*len(handles.m) + 1024
	}
}

// sweepHandles drops the handles that are freed or collected. handles.mu
// is held.
func sweepHandles() {
	for k, ws := range handles.m {
		kept := ws[:0]
		for _, w := range ws {
			if t := w.Value(); t != nil && !t.Freed() {
				kept = append(kept, w)
			}
		}
		if len(kept) == 0 {
			delete(handles.m, k)
			continue
		}
		clear(ws[len(kept):])
		handles.m[k] = kept
	}
}

// liveHandles returns the handles of the record id of tracker (a
// *track.Tracker) that are neither freed nor collected: the retainhook
// lookup. The handles returned are strong references: the caller pins
// them.
func liveHandles(tracker any, id uint64) []any {
	tr, ok := tracker.(*track.Tracker)
	if !ok || tr == nil {
		return nil
	}
	k := handleKey{tr: weak.Make(tr), id: id}
	handles.mu.Lock()
	defer handles.mu.Unlock()
	var out []any
	for _, w := range handles.m[k] {
		if t := w.Value(); t != nil && !t.Freed() {
			out = append(out, t)
		}
	}
	return out
}
