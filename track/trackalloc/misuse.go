package trackalloc

import (
	"context"
	"sync"

	"github.com/tensorlife/tensorlife/internal/hotpath"
	"github.com/tensorlife/tensorlife/track"
)

// Misuse is one double free or use after free of a record, with its lines:
// what an allocator notes (NoteMisuse) and a test helper lists
// (MisuseSince).
type Misuse struct {
	Kind           track.EventKind // track.EventDoubleFree or track.EventUseAfterFree
	Seq            uint64          // order among the tracker's misuses, from 1
	ID             uint64          // the record's id
	Bytes          int64
	Labels         track.Labels
	Allocated      *track.Site // nil when unknown
	FirstFree      *track.Site // nil when unknown
	SecondFree     *track.Site // of a double free
	Use            *track.Site // of a use after free
	FirstDeferred  bool        // the first Free ran from a defer statement
	SecondDeferred bool        // the second Free did
	req            any         // the record's request; nil if none
}

// MadeUnder reports whether m's allocation was made under ctx's request,
// or under a request begun within it.
func (m *Misuse) MadeUnder(ctx context.Context) bool { return hotpath.Track.MadeUnder(m.req, ctx) }

// NoteMisuse records a misuse of the record r, m.Kind being
// track.EventDoubleFree or track.EventUseAfterFree: it is counted in t's
// totals (Totals.Misuse), kept in its history if kept, and listed by
// MisuseSince. NoteMisuse fills m's ID, Bytes, Labels, Allocated and Seq
// from r; other kinds, a nil t or a nil r note nothing.
func NoteMisuse(t *track.Tracker, r *track.Record, m Misuse) {
	if t == nil || r == nil || m.Kind != track.EventDoubleFree && m.Kind != track.EventUseAfterFree {
		return
	}
	m.ID, m.Bytes, m.Labels, m.Allocated, m.req = r.ID(), r.Bytes, r.Labels(), r.Site(), hotpath.Track.RequestOf(r)
	site := m.SecondFree
	if m.Kind == track.EventUseAfterFree {
		site = m.Use
	}
	hotpath.Track.NoteMisuse(t, r, m.Kind, site)
	Local(t, misuseKey{}, newMisuseLog).add(m)
}

// MisuseSince returns the misuses t noted after sequence number seq, the
// number lost past the bound of the latest 256, and the latest sequence
// number: a test helper's cursor.
func MisuseSince(t *track.Tracker, seq uint64) (ms []Misuse, lost, latest uint64) {
	if t == nil {
		return nil, 0, 0
	}
	return Local(t, misuseKey{}, newMisuseLog).since(seq)
}

// misuseKey files a tracker's misuse log (Local).
type misuseKey struct{}

// misuseLogSize bounds the misuses a tracker remembers for MisuseSince;
// older ones are counted, not kept.
const misuseLogSize = 256

// misuseLog keeps a tracker's latest misuses under its own lock: misuse
// is rare, and a test checks it once.
type misuseLog struct {
	mu   sync.Mutex
	seq  uint64
	ring [misuseLogSize]Misuse
}

func newMisuseLog() *misuseLog { return new(misuseLog) }

// add numbers m and keeps it, over the oldest past the bound.
func (l *misuseLog) add(m Misuse) {
	l.mu.Lock()
	l.seq++
	m.Seq = l.seq
	l.ring[l.seq%misuseLogSize] = m
	l.mu.Unlock()
}

// since returns the misuses noted after seq, how many of those are lost,
// and the latest seq.
func (l *misuseLog) since(seq uint64) (ms []Misuse, lost, latest uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	latest = l.seq
	first := seq + 1
	if latest >= misuseLogSize && first <= latest-misuseLogSize {
		lost = latest - misuseLogSize + 1 - first
		first = latest - misuseLogSize + 1
	}
	for s := first; s <= latest; s++ {
		ms = append(ms, l.ring[s%misuseLogSize])
	}
	return ms, lost, latest
}
