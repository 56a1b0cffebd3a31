package tensor

import (
	"errors"
	"sync"

	"github.com/tensorlife/tensorlife/track"
)

// The runtime's finalizer and cleanup goroutines never run a part's code:
// one Release that blocks there stalls every finalizer in the process, a
// panic there ends the process, and a runtime.Goexit ends the finalizer
// goroutine itself. So when the collector finds a tensor's last handle
// dropped, its record leaves the tracker there (tracker code) and its
// memory is queued here; a releaser goroutine of this package calls the
// allocator's Release, under recover (track.Guard: counted on the tensor's
// tracker and logged once), and survives a Goexit by starting another.
// Releasers end when the queue is empty, so none outlives its work.

// maxReleasers bounds the goroutines draining the release queue: a
// Release that blocks holds one of them, not the queue.
const maxReleasers = 4

// releases is the process's release queue of dropped blocks. It is
// process-wide, like the finalizer goroutine it stands in for, and holds
// nothing while nothing waits.
var releases releaseQueue

type releaseQueue struct {
	mu      sync.Mutex
	queue   []*block // waiting, oldest first, from head
	head    int
	running int // releaser goroutines alive
	idle    int // of them, those not inside a Release
	// drained is broadcast each time the last releaser ends, for
	// WaitReleases; its L is mu, set at first use.
	drained sync.Cond
}

// push queues b's Release and starts a releaser unless an idle one will
// take it. It never blocks on a part's code.
func (q *releaseQueue) push(b *block) {
	q.mu.Lock()
	q.queue = append(q.queue, b)
	start := q.startLocked()
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

// waiting returns the blocks queued and not yet taken. The caller holds q.mu.
func (q *releaseQueue) waiting() int { return len(q.queue) - q.head }

// startLocked reports whether a new releaser must start, and counts it if
// so: when more blocks wait than idle releasers will take, and fewer than
// maxReleasers run. The caller holds q.mu.
func (q *releaseQueue) startLocked() bool {
	if q.waiting() <= q.idle || q.running >= maxReleasers {
		return false
	}
	q.running++
	q.idle++
	return true
}

// pop takes the oldest queued block; nil if none. The caller holds q.mu.
func (q *releaseQueue) pop() *block {
	if q.waiting() == 0 {
		return nil
	}
	b := q.queue[q.head]
	q.queue[q.head] = nil
	q.head++
	if q.head == len(q.queue) {
		q.queue, q.head = q.queue[:0], 0
	}
	return b
}

// endedLocked counts a releaser gone and wakes WaitReleases once none
// runs. The caller holds q.mu.
func (q *releaseQueue) endedLocked() {
	q.running--
	if q.running == 0 && q.drained.L != nil {
		q.drained.Broadcast()
	}
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
		b := q.pop()
		if b == nil {
			q.endedLocked()
			q.idle--
			q.mu.Unlock()
			returned = true
			return
		}
		q.idle--
		q.mu.Unlock()
		b.releaseDropped()
		q.mu.Lock()
		q.idle++
	}
}

// releaseDropped gives a dropped block's memory back to its allocator, on
// a releaser: ReleaseDropped for a DroppedReleaser, Release for any other.
// Nobody is left to hand an error to; a panic is recovered and counted on
// the tensor's tracker (nil for an untracked one: only recovered).
func (b *block) releaseDropped() {
	if d, ok := b.alloc.(DroppedReleaser); ok {
		_ = track.Guard(b.tracker(), d, "ReleaseDropped", func() { d.ReleaseDropped(b.mem) })
		return
	}
	_ = track.Guard(b.tracker(), b.alloc, "Release", func() { _ = b.alloc.Release(b.mem) })
}

// WaitReleases blocks until the memory of every tensor whose last handle
// the garbage collector found dropped, queued before the call, is back
// with its allocator, and no releaser runs. It is what a test waits on
// after a collection, instead of a clock: the tracker's figures change on
// the collector's own goroutine, the allocator's (a pool's Stats, a
// device's free memory) once the release has run. An allocator's Release
// that never returns makes it wait forever.
func WaitReleases() {
	q := &releases
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.drained.L == nil {
		q.drained.L = &q.mu
	}
	for q.running > 0 || q.waiting() > 0 {
		q.drained.Wait()
	}
}

// Releases are memory returns put off by FreeInto, to be made by Run once
// the caller has let go of its lock. The zero value is empty and ready.
// A Releases is not safe for concurrent use; it must not be copied after
// first use.
type Releases struct {
	blocks []*block
}

// Run gives each block put off back to its allocator, in the order they
// were added, and empties r. It returns the allocators' errors, joined. A
// Release that panics propagates, as from Free, once the blocks after it
// have been given back too.
func (r *Releases) Run() (err error) {
	if r == nil {
		return nil
	}
	defer func() {
		// A Release that panicked or called runtime.Goexit leaves the
		// blocks after it to this.
		if len(r.blocks) > 0 {
			err = errors.Join(err, r.Run())
		}
	}()
	for len(r.blocks) > 0 {
		b := r.blocks[0]
		r.blocks[0] = nil
		r.blocks = r.blocks[1:]
		err = errors.Join(err, b.alloc.Release(b.mem))
	}
	r.blocks = nil
	return err
}
