package foreign

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/counter"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// Stats are the figures of the memory adopted (Adopt) on one device of one
// tracker. Each is exact; they are not read at one instant together.
type Stats struct {
	// AllocatorStats count the adoptions: Reserved is the adopted bytes not
	// yet released, Blocks the adoptions not yet released, Allocs the
	// successful Adopt calls, Frees the Release calls (whatever their
	// outcome).
	tensor.AllocatorStats
	// Pending counts the adoptions whose last handle the garbage collector
	// found dropped and whose Release is running on a releaser goroutine
	// (one still queued there is not counted); its bytes stay in Reserved
	// until its Release starts.
	Pending int64
	// Failed counts the Release calls that returned an error, on any
	// goroutine.
	Failed int64
	// Panicked counts the Release calls that panicked (the panic
	// recovered), on any goroutine.
	Panicked int64
	// LastDroppedErr is the error of the latest failed or panicking Release
	// of a dropped adoption, which no caller could be handed; nil if none.
	// It matches ErrPanic for a panic.
	LastDroppedErr error
}

// Adoptions returns the figures of tr's adopted memory, one Stats per
// device that has had an adoption, sorted by device name; nil for a nil
// tracker (untracked adoptions are counted nowhere). It is safe for
// concurrent use and reads counters only.
func Adoptions(tr *track.Tracker) []Stats {
	if tr == nil {
		return nil
	}
	shelf, err := shelves.Of(tr)
	if err != nil {
		return nil // no books were ever kept: no adoption was made
	}
	shelf.mu.Lock()
	list := slices.Clone(shelf.books)
	shelf.mu.Unlock()
	out := make([]Stats, 0, len(list))
	for _, b := range list {
		st := Stats{AllocatorStats: b.stats(), Pending: b.pending.Load(),
			Failed: b.failures.Load(), Panicked: b.panics.Load()}
		if p := b.lastDropped.Load(); p != nil {
			st.LastDroppedErr = *p
		}
		out = append(out, st)
	}
	slices.SortStableFunc(out, func(x, y Stats) int { return cmp.Compare(x.Device, y.Device) })
	return out
}

// books count the adopted memory on one device of one tracker, for the
// tracker's readers: it is a track.Part whose reserved bytes are the
// adopted bytes not yet released. It lives as long as its
// tracker, on the tracker's shelf (track.Local).
type books struct {
	device string
	// reserved is exact past the int64 range and read saturated: adopted
	// memory is another library's claim, and two of 2^62 bytes on one
	// device name must read as MaxInt64, not wrap to a negative total.
	reserved      counter.Total
	peak          atomic.Int64
	allocs, frees atomic.Int64
	// pending counts dropped adoptions whose Release is running;
	// failures counts the Release calls that returned an error, panics
	// those that panicked.
	pending, failures, panics atomic.Int64
	lastDropped               atomic.Pointer[error] // see Stats.LastDroppedErr
}

// PartInfo reports the adopted bytes still held on the device, which count
// as tensorlife's there; adoption takes nothing, so it has no headroom.
func (b *books) PartInfo() track.PartInfo {
	return track.PartInfo{Kind: "adoptions", Device: b.device, Reserved: b.reserved.Load(), Left: -1}
}

// add counts an adoption of bytes.
func (b *books) add(bytes int64) {
	b.allocs.Add(1)
	counter.RaisePeak(&b.peak, b.reserved.Add(bytes))
}

// remove counts the release of an adoption of bytes.
func (b *books) remove(bytes int64) {
	b.frees.Add(1)
	b.reserved.Add(-bytes)
}

// failed counts a Release that returned err or panicked.
func (b *books) failed(err error) {
	if isPanic(err) {
		b.panics.Add(1)
	} else {
		b.failures.Add(1)
	}
}

// stats returns the figures, one block per adoption not yet released.
func (b *books) stats() tensor.AllocatorStats {
	// Frees first: a block is counted allocated before it can be freed, so
	// the difference is never negative.
	frees := b.frees.Load()
	allocs := b.allocs.Load()
	return tensor.AllocatorStats{Device: b.device, Reserved: b.reserved.Load(), Peak: b.peak.Load(),
		Blocks: allocs - frees, Allocs: allocs, Frees: frees}
}

// adoptionBooks finds the books of adoptions on the device named name in
// tracker, or makes and attaches them; nil for a nil tracker, whose
// adoptions no report counts. It fails only if the tracker keeps no room
// for the books (track.ErrTooManyLocals).
func adoptionBooks(tracker *track.Tracker, name string) (*books, error) {
	if tracker == nil {
		return nil, nil
	}
	shelf, err := shelves.Of(tracker)
	if err != nil {
		return nil, err
	}
	shelf.mu.Lock()
	defer shelf.mu.Unlock()
	for _, b := range shelf.books {
		if b.device == name {
			return b, nil
		}
	}
	b := &books{device: name}
	track.Attach(tracker, b)
	shelf.books = append(shelf.books, b)
	return b, nil
}

// shelf keeps a tracker's adoption books, one per device, for as long as
// the tracker lives: the tracker holds its parts weakly, and the counts of
// failed releases (Stats) must outlive the adoptions they count. It is the
// tracker's (track.Local), and goes with it.
type shelf struct {
	mu    sync.Mutex
	books []*books
}

// shelves keeps each tracker's adoption books.
var shelves = track.NewLocal(func() *shelf { return new(shelf) })
