package foreign

import (
	"errors"
	"runtime/debug"
	"sync"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// Release functions (Memory.Release) are foreign code: a panic in one must
// not take the process down, and one that blocks must not hold anything of
// tensorlife's. callRelease runs one with the panic recovered; the release
// queue keeps them off the runtime's finalizer goroutine, whose blocking
// would stall every finalizer in the process, every leak report among
// them (see the package doc).

// callRelease calls release(p), returning its error or, if it panicked, a
// *PanicError, which it counts on tr unless tr is nil (Books.NotePanic).
// A release that calls runtime.Goexit ends the calling goroutine, as it
// would anywhere.
func callRelease(tr *track.Tracker, release func(tensor.DevicePtr) error, p tensor.DevicePtr) (err error) {
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			err = &PanicError{Func: "Memory.Release", Value: v,
				Stack: string(stack[:min(len(stack), maxPanicStack)])}
			if tr != nil {
				tr.Books().NotePanic("foreign.Memory", "Release", v)
			}
		}
	}()
	return release(p)
}

// deviceFigures reads the name and total memory of mem's device for
// Adopt, each call under recover (track.Guard): a device whose Name or
// MemInfo panics fails the Adopt with a *tensor.DeviceError matching
// ErrPanic and tensor.ErrPanic, and the memory stays the caller's.
func deviceFigures(tr *track.Tracker, mem Memory) (name string, total int64, err error) {
	dev := mem.Device
	if perr := track.Guard(tr, dev, "Name", func() { name = dev.Name() }); perr != nil {
		return "", 0, &tensor.DeviceError{Op: "name", Bytes: mem.Bytes, Err: perr}
	}
	name, _ = format.Text(name, track.MaxMetaText) // in every figure and error, as a Meta's texts

	if perr := track.Guard(tr, dev, "MemInfo", func() { _, total, err = dev.MemInfo() }); perr != nil {
		err = perr
	}
	if err != nil {
		return name, 0, &tensor.DeviceError{Op: "meminfo", Device: name, Bytes: mem.Bytes, Err: err}
	}
	return name, total, nil
}

// isPanic reports whether err is a recovered panic.
func isPanic(err error) bool {
	var pe *PanicError
	return errors.As(err, &pe)
}

// maxReleasers bounds the goroutines draining the release queue.
const maxReleasers = 4

// releases is the process's release queue: adoptions whose last handle the
// garbage collector found dropped, waiting for their Release. It is
// process-wide, like the finalizer goroutine it stands in for, and holds
// nothing while nothing waits. The queue is a list threaded through the
// adoptions themselves, so queuing allocates nothing on the finalizer
// goroutine and the queue is bounded by the adoptions that exist.
var releases releaseQueue

type releaseQueue struct {
	mu         sync.Mutex
	head, tail *adoption
	queued     int // adoptions in the list
	running    int // releaser goroutines alive
	idle       int // of them, those not inside a Release
	// drained is broadcast each time the last releaser ends, for waitIdle;
	// its L is mu, set at first use.
	drained sync.Cond
}

// endedLocked counts a releaser gone and wakes waitIdle once none runs.
// The caller holds q.mu.
func (q *releaseQueue) endedLocked() {
	q.running--
	if q.running == 0 && q.drained.L != nil {
		q.drained.Broadcast()
	}
}

// waitIdle blocks until nothing is queued and no releaser runs: every
// dropped adoption queued before it has been released, and its figures
// (Stats.Pending, the books) are final. A Release that never returns makes
// it wait forever; tests call it once the releases they started can end.
func (q *releaseQueue) waitIdle() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.drained.L == nil {
		q.drained.L = &q.mu
	}
	for q.running > 0 || q.queued > 0 {
		q.drained.Wait()
	}
}

// push queues a's Release and starts a releaser unless an idle one will
// take it. It never blocks on foreign code.
func (q *releaseQueue) push(a *adoption) {
	if a.books != nil {
		a.books.pending.Add(1)
	}
	q.mu.Lock()
	if q.tail == nil {
		q.head = a
	} else {
		q.tail.next = a
	}
	q.tail = a
	q.queued++
	start := q.startLocked()
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

// startLocked reports whether a new releaser must start, and counts it if
// so: when more adoptions wait than idle releasers will take, and fewer
// than maxReleasers run. The caller holds q.mu.
func (q *releaseQueue) startLocked() bool {
	if q.queued <= q.idle || q.running >= maxReleasers {
		return false
	}
	q.running++
	q.idle++
	return true
}

// pop takes the oldest queued adoption; nil if none. The caller holds q.mu.
func (q *releaseQueue) pop() *adoption {
	a := q.head
	if a == nil {
		return nil
	}
	q.head, a.next = a.next, nil
	if q.head == nil {
		q.tail = nil
	}
	q.queued--
	return a
}

// drain is a releaser: it runs queued releases until the queue is empty,
// then ends.
func (q *releaseQueue) drain() {
	returned := false
	defer func() {
		if returned {
			return
		}
		// A Release called runtime.Goexit, ending this goroutine inside
		// it: count it gone, and start another if work still waits.
		q.mu.Lock()
		q.endedLocked()
		start := q.startLocked()
		q.mu.Unlock()
		if start {
			go q.drain()
		}
	}()
	q.mu.Lock()
	for {
		a := q.pop()
		if a == nil {
			q.endedLocked()
			q.idle--
			q.mu.Unlock()
			returned = true
			return
		}
		q.idle--
		q.mu.Unlock()
		a.releaseDropped()
		q.mu.Lock()
		q.idle++
	}
}

// releaseDropped runs the Release of a dropped adoption, on a releaser:
// nobody is left to hand its error to, so it is counted and kept in the
// books (Stats).
func (a *adoption) releaseDropped() {
	b := a.books
	if b != nil {
		defer b.pending.Add(-1) // also if Release ends the goroutine
	}
	err := a.Release(tensor.Block{Ptr: a.mem.Ptr})
	if err != nil && b != nil {
		b.lastDropped.Store(&err)
	}
}
