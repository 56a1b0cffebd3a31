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

// Holder is a kind of handle keeping an allocation alive, by its line.
type Holder struct {
	Site    *Site  // where the handle was made; nil for those past the bound
	How     string // "Retain", "View", an owner's name; "allocation" for the own handle
	Live    int    // handles neither freed nor found dropped
	Dropped int    // found dropped without Free
}

// howOwn is Holder.How of an allocation's own handle, the one New returned.
const howOwn = "allocation"

// String describes h as reports do: "a View made at decode.go:88 (pkg.decode)".
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
	// holds are the owners that hold the record (HandOver), each with
	// the HandOvers of it not yet handed back; the latest last.
	holds []ownerHold
	// counted is what the record adds to its site's holder counters
	// (HeldBy): heldBy's answer when last changed; released, set at
	// Release, keeps it at nothing after.
	counted  Holder
	released bool
}

// ownerHold is one owner's hold on a record: n HandOvers not yet handed
// back.
type ownerHold struct {
	book *ownerBook
	n    int32
}

// ownerOf returns the owner that last took r (HandOver) and holds it
// still; nil if none, or if that owner was collected.
func (r *Record) ownerOf() *Owner {
	s := r.holders.Load()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.holds) == 0 {
		return nil
	}
	return s.holds[len(s.holds)-1].book.owner.Value()
}

// leaveOwners takes r out of every owner's figures, on release. Called
// with r's shard lock held.
func (r *Record) leaveOwners() {
	if r.word.Load()&handedFlag == 0 {
		return
	}
	s := r.holders.Load()
	if s == nil {
		return
	}
	s.mu.Lock()
	holds := s.holds
	s.holds = nil
	s.mu.Unlock()
	for _, h := range holds {
		h.book.add(r.site, -r.Bytes, -1)
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
	s.recount(r)
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
	s.recount(r)
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
			s.recount(r)
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
	s.recount(r)
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
	return s.heldBy()
}

// heldBy is Record.heldBy with s.mu held.
func (s *holderSet) heldBy() (h Holder, ok bool) {
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
			yield(Holder{How: otherHandles, Live: int(s.other.live), Dropped: int(s.other.dropped)})
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
		if h.How == howOwn {
			return Holder{}, false
		}
		if !ok {
			held, ok = h, true
		}
	}
	return held, ok
}

// recount brings r's share of its site's holder counters to what heldBy
// answers now. Called with s.mu held after every change of s: O(1) but for
// the site's lock, which nothing holds longer than one update.
func (s *holderSet) recount(r *Record) {
	var now Holder
	if !s.released {
		now, _ = s.heldBy()
	}
	now = Holder{Site: now.Site, How: now.How, Live: now.Live}
	if was := s.counted; was.Live > 0 {
		if was.Live == now.Live && was.How == now.How && was.Site == now.Site {
			return
		}
		r.site.held.sub(was)
	}
	s.counted = Holder{}
	if now.Live > 0 {
		s.counted = r.site.held.add(now)
	}
}

// release takes r's share out of its site's holder counters for good, at
// Release.
func (s *holderSet) release(r *Record) {
	s.mu.Lock()
	s.released = true
	s.recount(r)
	s.mu.Unlock()
}

// maxSiteHolders bounds the holders a site counts apart for HeldBy; the
// handles of further ones are counted together as handles made at other
// sites, so a site held from many lines costs bounded memory.
const maxSiteHolders = 16

// otherHandles is Holder.How of handles counted together, made at other
// sites (Holder.Site nil).
const otherHandles = "handle"

// siteHolders counts, per holder, the live handles that keep a site's
// records alive once their own handles are gone: what HeldBy reads, kept
// as records are held and released so that the out-of-memory error and
// the watcher never walk the live set for it. Its lock is taken after a
// record's holder set's, never the other way, and only on changes of
// records that have extra holders: a plain tensor never takes it.
type siteHolders struct {
	mu      sync.Mutex
	entries []siteHolder // at most maxSiteHolders
	other   int64        // the handles counted together
}

type siteHolder struct {
	site *Site
	how  string
	live int64
}

// add counts h.Live handles of h's holder and returns the holder they are
// counted under: h's own, or the shared one past the bound. An entry is
// reused only once it counts nothing, so that sub finds it.
func (sh *siteHolders) add(h Holder) Holder {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if h.Site != nil || h.How != otherHandles {
		free := -1
		for i := range sh.entries {
			e := &sh.entries[i]
			if e.site == h.Site && e.how == h.How {
				e.live += int64(h.Live)
				return h
			}
			if e.live == 0 && free < 0 {
				free = i
			}
		}
		switch {
		case free >= 0:
			sh.entries[free] = siteHolder{site: h.Site, how: h.How, live: int64(h.Live)}
			return h
		case len(sh.entries) < maxSiteHolders:
			sh.entries = append(sh.entries, siteHolder{site: h.Site, how: h.How, live: int64(h.Live)})
			return h
		}
	}
	sh.other += int64(h.Live)
	return Holder{How: otherHandles, Live: h.Live}
}

// sub takes back what add counted under h.
func (sh *siteHolders) sub(h Holder) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if h.Site != nil || h.How != otherHandles {
		for i := range sh.entries {
			if e := &sh.entries[i]; e.site == h.Site && e.how == h.How {
				e.live -= int64(h.Live)
				return
			}
		}
	}
	sh.other -= int64(h.Live)
}

// list returns the site's holders with live handles.
func (sh *siteHolders) list() []Holder {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	out := []Holder{}
	for _, e := range sh.entries {
		if e.live > 0 {
			out = append(out, Holder{Site: e.site, How: e.how, Live: int(e.live)})
		}
	}
	if sh.other > 0 {
		out = append(out, Holder{How: otherHandles, Live: int(sh.other)})
	}
	return out
}

// HeldBy returns, per site, up to max extra owners holding its allocations
// after their own handles were freed, most first. It reads counters kept
// as records are held and released: O(sites × holders), no walk of the
// live set and no shard lock, so that it is cheap on the out-of-memory
// path.
func (bk *Books) HeldBy(sites []*Site, limit int) [][]Holder {
	out := make([][]Holder, len(sites))
	for i, s := range sites {
		if s == nil {
			out[i] = []Holder{}
			continue
		}
		hs := s.held.list()
		slices.SortFunc(hs, func(a, b Holder) int {
			return cmp.Or(cmp.Compare(b.Live, a.Live), strings.Compare(a.How, b.How), cmp.Compare(siteID(a.Site), siteID(b.Site)))
		})
		out[i] = hs[:min(max(limit, 0), len(hs))]
	}
	return out
}

func siteID(s *Site) int {
	if s == nil {
		return -1
	}
	return s.id
}
