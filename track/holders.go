package track

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/tensorlife/tensorlife/internal/format"
)

// Holder is a kind of handle keeping an allocation alive (its own, a View, a
// Retain, a cache entry) by the line that made it.
type Holder struct {
	Site          *Site  // where the handle was made; nil for those past the bound
	How           string // "Retain", "View", an owner's name; "allocation" for the own handle
	Live, Dropped int    // handles neither freed nor found dropped; found dropped without Free
}

// howOwn is Holder.How of an allocation's own handle, the one New returned.
const howOwn = "allocation"

// Own reports whether h is the allocation's own handle.
func (h Holder) Own() bool { return h.How == howOwn }

// String describes h as every report does: "a View made at decode.go:88
// (pkg.decode)".
func (h Holder) String() string {
	what := "a " + h.How
	if h.How == howOwn {
		what = "its own handle"
	}
	if h.Site == nil {
		return what + " made at other sites"
	}
	loc := h.Site.Location()
	return fmt.Sprintf("%s made at %s:%d (%s)", what, format.File(loc.File), loc.Line, format.Function(loc.Function))
}

// maxHolders bounds the holder sites one record keeps apart; further ones
// are counted together (Holder.Site nil), so a tensor retained from many
// lines costs bounded memory.
const maxHolders = 4

// holderSet counts a record's extra holders by site. A record gets one
// on its first extra holder: most tensors have only their own handle and
// pay a nil pointer. Hold and Unhold are O(maxHolders) under the set's lock,
// which nothing else takes while holding it.
type holderSet struct {
	mu      sync.Mutex
	own     int8 // the allocation's own handle: 1 live, 0 freed, -1 dropped and kept
	entries [maxHolders]holderCount
	other   holderCount
	// owner is the book of what HandOver gave the record to, nil if
	// nothing; handovers counts the HandOvers not yet handed back.
	owner     *ownerBook
	handovers int32
}

// ownerOf returns what HandOver gave r to, nil if nothing or if that owner
// was collected.
func (r *Record) ownerOf() *Owner {
	s := r.holders.Load()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner == nil {
		return nil
	}
	return s.owner.owner.Value()
}

// leaveOwner takes r out of its owner's figures, on release. Called with
// r's shard lock held.
func (r *Record) leaveOwner() {
	if r.word.Load()&handedFlag == 0 {
		return
	}
	s := r.holders.Load()
	if s == nil {
		return
	}
	s.mu.Lock()
	b := s.owner
	s.owner, s.handovers = nil, 0
	s.mu.Unlock()
	if b != nil {
		b.add(r.site, -r.Bytes, -1)
	}
}

type holderCount struct {
	site          *Site
	how           string
	live, dropped int32
}

func (s *holderSet) find(site *Site, how string, add bool) *holderCount {
	for i := range s.entries {
		e := &s.entries[i]
		if e.site == site && e.how == how && (e.live > 0 || e.dropped > 0) {
			return e
		}
	}
	if add {
		for i := range s.entries {
			if e := &s.entries[i]; e.live == 0 && e.dropped == 0 {
				e.site, e.how = site, how
				return e
			}
		}
	}
	return &s.other
}

func (r *Record) holderSet() *holderSet {
	if s := r.holders.Load(); s != nil {
		return s
	}
	s := &holderSet{own: 1}
	if r.leaked() {
		s.own = -1
	}
	if r.holders.CompareAndSwap(nil, s) {
		return s
	}
	return r.holders.Load()
}

// Hold counts a handle on r made at site by how ("Retain", "View").
func (r *Record) Hold(site *Site, how string) {
	if r == nil || site == nil || r.tracker == nil {
		return
	}
	s := r.holderSet()
	s.mu.Lock()
	s.find(site, how, true).live++
	s.mu.Unlock()
}

// Unhold uncounts a handle counted by Hold, or, with a nil site, r's own.
func (r *Record) Unhold(site *Site, how string) {
	if r == nil || r.tracker == nil {
		return
	}
	s := r.holders.Load()
	if s == nil {
		return // only the own handle ever held r: nothing is counted
	}
	s.mu.Lock()
	if site == nil {
		s.own = 0
	} else if e := s.find(site, how, false); e.live > 0 {
		e.live--
	}
	s.mu.Unlock()
	if site == nil {
		r.tracker.makeSpecial(r) // extra owners hold it now: a group of its own
	}
}

// markDropped moves a handle from live to dropped: the garbage collector
// found it without Free. The line that made it stays with the record until
// the record is released, whether or not the tracker reclaims its share, so
// that a report names it whenever the collector ran.
func (r *Record) markDropped(site *Site, how string) {
	if site == nil {
		if s := r.holders.Load(); s != nil {
			s.mu.Lock()
			s.own = -1
			s.mu.Unlock()
		}
		return // without a set, the leaked flag says the own handle dropped
	}
	s := r.holderSet()
	s.mu.Lock()
	if e := s.find(site, how, false); e.live > 0 {
		e.live--
		e.dropped++
	}
	s.mu.Unlock()
}

// holderList returns r's holders, its own handle first; leaked is r's
// leaked flag, as the caller read it.
func (r *Record) holderList(leaked bool) []Holder {
	s := r.holders.Load()
	if s == nil {
		h := Holder{Site: r.site, How: howOwn, Live: 1}
		if leaked {
			h.Live, h.Dropped = 0, 1
		}
		return []Holder{h}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Holder
	switch s.own {
	case 1:
		out = append(out, Holder{Site: r.site, How: howOwn, Live: 1})
	case -1:
		out = append(out, Holder{Site: r.site, How: howOwn, Dropped: 1})
	}
	for _, e := range s.entries {
		if e.live > 0 || e.dropped > 0 {
			out = append(out, Holder{Site: e.site, How: e.how, Live: int(e.live), Dropped: int(e.dropped)})
		}
	}
	if s.other.live > 0 || s.other.dropped > 0 {
		out = append(out, Holder{How: "handle", Live: int(s.other.live), Dropped: int(s.other.dropped)})
	}
	return out
}

// heldBy returns the first extra owner still holding r's memory once its
// own handle no longer does (freed, or dropped and kept); ok is false while
// the own handle holds it, or when nothing but dropped handles do. It reads
// the holder set in place, allocating nothing, and answers as heldByOf
// would for r's holderList.
func (r *Record) heldBy() (h Holder, ok bool) {
	s := r.holders.Load()
	if s == nil {
		return Holder{}, false // only the own handle ever held r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own == 1 {
		return Holder{}, false
	}
	return heldFrom(func(yield func(Holder) bool) {
		for _, e := range s.entries {
			if !yield(Holder{Site: e.site, How: e.how, Live: int(e.live), Dropped: int(e.dropped)}) {
				return
			}
		}
		if s.other.live > 0 {
			yield(Holder{How: "handle", Live: int(s.other.live), Dropped: int(s.other.dropped)})
		}
	})
}

// heldByOf is heldBy for a holder list (Allocation.Holders).
func heldByOf(hs []Holder) (Holder, bool) { return heldFrom(slices.Values(hs)) }

// heldFrom is what heldBy and heldByOf share: the first live extra owner
// among holders, unless the allocation's own handle is live (an owner named
// as the own handle counts as it: the two cannot be told apart).
func heldFrom(holders iter.Seq[Holder]) (held Holder, ok bool) {
	for h := range holders {
		if h.Live <= 0 {
			continue
		}
		if h.Own() {
			return Holder{}, false
		}
		if !ok {
			held, ok = h, true
		}
	}
	return held, ok
}

// HeldBy returns, per site, up to max extra owners holding its allocations
// after their own handles were freed, most first: one walk of the live set.
func (t *Tracker) HeldBy(sites []*Site, max int) [][]Holder {
	type key struct {
		site *Site
		how  string
	}
	index := make(map[*Site]int, len(sites))
	for i, s := range sites {
		index[s] = i
	}
	t.settle()
	counts := make([]map[key]int, len(sites))
	for i := range counts {
		counts[i] = map[key]int{}
	}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for r := sh.head; r != nil; r = r.next {
			j, ok := index[r.site]
			if !ok {
				continue
			}
			if h, ok := r.heldBy(); ok {
				counts[j][key{h.Site, h.How}] += h.Live
			}
		}
		sh.mu.Unlock()
	}
	out := make([][]Holder, len(sites))
	for i, count := range counts {
		hs := make([]Holder, 0, len(count))
		for k, n := range count {
			hs = append(hs, Holder{Site: k.site, How: k.how, Live: n})
		}
		slices.SortFunc(hs, func(a, b Holder) int {
			return cmp.Or(cmp.Compare(b.Live, a.Live), strings.Compare(a.How, b.How), cmp.Compare(siteID(a.Site), siteID(b.Site)))
		})
		out[i] = hs[:min(max, len(hs))]
	}
	return out
}

func siteID(s *Site) int {
	if s == nil {
		return -1
	}
	return s.id
}
