package track

import (
	"cmp"
	"slices"
	"time"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// RequestStats is what one open request holds now: a fact, never a
// verdict. A request that stays open for long (a worker that labels its
// long-lived context once, a client that stopped reading) stands at the
// top of OpenRequests' lists, and nothing judges it: in-flight memory is
// never a leak.
type RequestStats struct {
	// Labels are those of the request's record with the most labels.
	Labels Labels
	// Begun is when the tracker first listed it (its first record), on
	// the tracker's clock.
	Begun time.Time
	// Age is how long it has been open since it began.
	Age time.Duration
	// InFlightBytes is what it holds now and has neither released nor
	// handed to an owner: all it has grown since it began.
	InFlightBytes int64
	// InFlightTensors counts the tensors of InFlightBytes.
	InFlightTensors int64
	// PeakBytes is the most it has held in flight at once.
	PeakBytes int64
	// TopSite is the site at which it holds most bytes now; nil when it
	// holds nothing.
	TopSite *Site
	// TopSiteBytes are the bytes it holds at TopSite.
	TopSiteBytes int64
	// Device is the device of its first tensor.
	Device string
}

// OpenRequests is a tracker's open requests at one moment: how many, what
// they hold in all, and the largest and the oldest of them.
type OpenRequests struct {
	// Count is the number of requests open, each counted once however
	// many label calls made it.
	Count int
	// InFlightBytes sums what the open requests hold: the rows of
	// Largest plus OthersBytes make it exactly.
	InFlightBytes int64
	// InFlightTensors counts the tensors of InFlightBytes.
	InFlightTensors int64
	// OldestAge is the age of the oldest open request; 0 if none.
	OldestAge time.Duration
	// Largest are the n requests holding most in-flight bytes, largest
	// first (ties: oldest first).
	Largest []RequestStats
	// Oldest are the n requests open longest, oldest first.
	Oldest []RequestStats
	// OthersBytes is what the requests not in Largest hold.
	OthersBytes int64
	// OthersTensors counts the tensors of OthersBytes.
	OthersTensors int64
	// OthersCount is how many requests are not in Largest.
	OthersCount int
}

// MaxOpenRows bounds the n of Tracker.OpenRequests.
const MaxOpenRows = 256

// OpenRequests returns the tracker's open requests, with the n largest
// (by in-flight bytes) and the n oldest (n is cut to 0..MaxOpenRows; 0
// returns the figures alone, what metrics read). The book keeps them as
// they grow and end (requestbook.go): a read costs the requests changed
// since the last one and O(n log open), never a walk of the open requests
// or of the live set. The rows are exact: each request about to be shown,
// and the oldest of each shard, is looked at first, and one whose context
// is done is ended and left out. Count and the sums count a request begun
// by WithLabels whose context is done as open until its end is found:
// about ⌈open/32⌉ readings later (Totals). A request that records in two
// trackers shows what it holds in both. Safe for concurrent use.
func (t *Tracker) OpenRequests(n int) OpenRequests {
	n = min(max(n, 0), MaxOpenRows)
	t.sweep()
	b := &t.requests
	for {
		out, largest, oldest, over := b.read(n)
		if len(over) == 0 {
			now := t.unixAt(t.now())
			if out.Count > 0 {
				out.OldestAge = time.Duration(max(now-oldest[0].begun, 0))
			}
			out.OthersTensors, out.OthersCount = out.InFlightTensors, out.Count // OthersBytes: read's
			for _, r := range largest {
				out.OthersTensors -= r.tensors
				out.OthersCount--
			}
			out.Largest = rowsStats(largest, now)
			out.Oldest = rowsStats(oldest[:min(n, len(oldest))], now)
			return out
		}
		// Each round ends at least one request, each request once: a
		// reading pays for the ends it found, amortized O(1) each.
		endAll(over)
	}
}

// read reads the book's figures and its n largest and n oldest requests
// (at least the oldest one), and returns with them the requests among
// those rows whose context is done, to be ended before a read again: each
// shard gives its n largest and n oldest, and the rows are the best of
// those.
func (b *requestBook) read(n int) (out OpenRequests, largest, oldest []openRow, over []*request) {
	largest = make([]openRow, 0, n+1)
	oldest = make([]openRow, 0, max(n, 1)+1)
	var cands []*bookEntry
	var rows []openRow
	var front []int32
	var inFlight counter.Sum // exact: each shard's sum is
	for i := range b.shards {
		sh := &b.shards[i]
		if sh.listed.Load() == 0 {
			continue
		}
		sh.drain()
		cands, rows = cands[:0], rows[:0]
		sh.mu.Lock()
		out.Count += len(sh.open)
		inFlight.AddSum(sh.bytes)
		out.InFlightTensors += sh.tensors
		cands, front = sh.topLargest(cands, front, n)
		for e, k := sh.oldest, 0; e != nil && k < max(n, 1); e, k = e.next, k+1 {
			cands = append(cands, e)
		}
		for _, e := range cands {
			rows = append(rows, openRow{q: e.q, bytes: e.bytes, tensors: e.tensors, begun: e.begun})
		}
		sh.mu.Unlock()
		for _, r := range rows {
			if n > 0 && (len(largest) < n || largerRow(r, largest[n-1]) < 0) {
				largest = keepTop(largest, n, r, largerRow)
			}
			if len(oldest) < max(n, 1) || olderRow(r, oldest[len(oldest)-1]) < 0 {
				oldest = keepTop(oldest, max(n, 1), r, olderRow)
			}
		}
	}
	out.InFlightBytes = inFlight.Load()
	for _, r := range largest {
		inFlight.Add(-r.bytes)
	}
	out.OthersBytes = max(inFlight.Load(), 0)
	// The rows to be shown are looked at, and no other.
	for _, rs := range [2][]openRow{largest, oldest} {
		for _, r := range rs {
			if r.q.isDone() {
				over = append(over, r.q)
			}
		}
	}
	return out, largest, oldest, over
}

// openRow is one request as the scan read it.
type openRow struct {
	q              *request
	bytes, tensors int64
	begun          int64
}

func largerRow(a, b openRow) int {
	if c := cmp.Compare(b.bytes, a.bytes); c != 0 {
		return c
	}
	return cmp.Compare(a.begun, b.begun)
}

func olderRow(a, b openRow) int {
	if c := cmp.Compare(a.begun, b.begun); c != 0 {
		return c
	}
	return cmp.Compare(b.bytes, a.bytes)
}

// keepTop keeps in rows, sorted by less, the n first of rows and row, each
// request once.
func keepTop(rows []openRow, n int, row openRow, less func(a, b openRow) int) []openRow {
	if len(rows) == n && less(row, rows[n-1]) >= 0 {
		return rows
	}
	if slices.ContainsFunc(rows, func(r openRow) bool { return r.q == row.q }) {
		return rows
	}
	i, _ := slices.BinarySearchFunc(rows, row, less)
	if len(rows) == n {
		rows = rows[:n-1]
	}
	return slices.Insert(rows, i, row)
}

// rowsStats turns rows into their stats, reading each request's top site
// under its lock (no book lock is held). The bytes are those the scan read,
// so that rows and others add up.
func rowsStats(rows []openRow, now int64) []RequestStats {
	if len(rows) == 0 {
		return nil
	}
	out := make([]RequestStats, len(rows))
	for i, r := range rows {
		q := r.q
		s := RequestStats{
			Begun:           time.Unix(0, r.begun),
			Age:             time.Duration(max(now-r.begun, 0)),
			InFlightBytes:   r.bytes,
			InFlightTensors: r.tensors,
		}
		q.mu.Lock()
		s.Labels, s.Device = Labels{set: q.labels}, q.device()
		s.PeakBytes = max(q.peak, r.bytes)
		for i := range q.sites {
			if e := &q.sites[i]; e.bytes.load() > s.TopSiteBytes {
				s.TopSite, s.TopSiteBytes = e.site, e.bytes.load()
			}
		}
		for _, e := range q.more {
			if e.bytes.load() > s.TopSiteBytes {
				s.TopSite, s.TopSiteBytes = e.site, e.bytes.load()
			}
		}
		q.mu.Unlock()
		out[i] = s
	}
	return out
}
