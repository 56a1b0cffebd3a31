package gomlxtrack

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gomlx/gomlx/backends"
	"github.com/tensorlife/tensorlife/track"
)

// slot is the tracked state of one buffer or compiled program of a wrapped
// backend: the wrapped backend's own value and its current record. What
// GoMLX holds (a *buffer, an *executable) points at its slot; the slot
// never points back, so that a cleanup on the holder can take the slot.
type slot struct {
	b       *backend
	inner   backends.Buffer // the wrapped backend's buffer; nil for a program
	program backends.Executable

	own  track.Record                 // the first record, kept in the slot
	rec  atomic.Pointer[track.Record] // the live record, or pending; nil once finalized, donated or reclaimed
	site *track.Site                  // where a pending record is to be made
	// gone is the record last released, for the note of a double free.
	gone atomic.Pointer[track.Record]

	prev, next *slot // b.live's list, under its lock
	listed     bool
}

// pending stands for the record of an output made inside Exec, which Exec
// makes under its context's request once the program returns (rebook).
var pending = new(track.Record)

// take takes s's live record (or pending), nil if it has none: the one
// caller that gets it releases it.
func (s *slot) take() *track.Record { return s.rec.Swap(nil) }

// release releases r, taken from s, and unlists s.
func (s *slot) release(r *track.Record) {
	s.b.live.remove(s)
	if r == pending {
		return // never booked
	}
	s.gone.Store(r)
	_ = r.Release() // r is live and b's: no misuse to report
}

// describe says what s holds, for an error.
func (s *slot) describe() string {
	if m := s.own.Meta; m != nil {
		return fmt.Sprintf("%s %s%v", m.Kind, m.DType, m.Shape)
	}
	return KindBuffer
}

// addCleanup watches holder, what GoMLX holds of s: once the collector finds
// it unreachable with s's record still live, the record is reported
// dropped, and reclaimed as the tracker says.
func addCleanup[H any](holder *H, s *slot) {
	runtime.AddCleanup(holder, dropped, s)
}

// dropped is the cleanup of a buffer or program GoMLX dropped without
// finalizing it. It runs on the runtime's cleanup goroutine, so the
// wrapped backend's finalize runs under recover (track.Guard).
func dropped(s *slot) {
	r := s.take()
	if r == nil {
		return // finalized, donated or released with the backend
	}
	if r == pending {
		// Dropped inside the Exec that made it (GoMLX drops the outputs of
		// logged nodes it does not return): booked now, at its line, to
		// be reported.
		if s.b.tr.Books().RecordAt(context.Background(), &s.own, s.site) != nil {
			return
		}
		r = &s.own
		s.b.live.add(s)
	}
	if s.b.done.Load() {
		s.release(r) // the backend freed it with itself
		return
	}
	if !r.ReportDropped(nil, "") {
		s.rec.Store(r) // the tracker keeps it; Finalize of the backend still releases it
		return
	}
	if s.program != nil {
		_ = track.Guard(s.b.tr, s.b.Backend, "Executable.Finalize", s.program.Finalize)
	} else {
		_ = track.Guard(s.b.tr, s.b.Backend, "BufferFinalize", func() { _ = s.b.Backend.BufferFinalize(s.inner) })
	}
	s.release(r)
}

// liveSet lists a backend's slots with a live record, for Finalize. One
// lock a backend: a buffer costs it an insert and a removal, a few
// pointer writes each.
type liveSet struct {
	mu   sync.Mutex
	head *slot
}

func (l *liveSet) add(s *slot) {
	l.mu.Lock()
	s.next = l.head
	if l.head != nil {
		l.head.prev = s
	}
	l.head = s
	s.listed = true
	l.mu.Unlock()
}

func (l *liveSet) remove(s *slot) {
	l.mu.Lock()
	if s.listed {
		if s.prev != nil {
			s.prev.next = s.next
		} else {
			l.head = s.next
		}
		if s.next != nil {
			s.next.prev = s.prev
		}
		s.prev, s.next, s.listed = nil, nil, false
	}
	l.mu.Unlock()
}

// releaseAll releases every listed slot's record: their backend frees them.
func (l *liveSet) releaseAll() {
	l.mu.Lock()
	var all []*slot
	for s := l.head; s != nil; s = s.next {
		all = append(all, s)
	}
	l.mu.Unlock()
	for _, s := range all {
		if r := s.take(); r != nil {
			s.release(r)
		}
	}
}
