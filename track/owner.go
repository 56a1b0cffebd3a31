package track

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// Owner holds tensors past their request on purpose: a cache, a session
// store (tensor.Tensor.HandTo). With MaxBytes > 0 what it holds is never
// judged by growth, and holding more is reported as such (OwnerStats.
// OverBound): the owner is over its bound, which is no leak; without a
// bound, it is judged by growth, so an unbounded cache is still found.
//
// An owner lives as long as what it holds: the handle a tensor was handed
// over through keeps its owner reachable, so an owner made inline,
// x.HandTo(&track.Owner{Name: "sessions"}), holds x until x is freed. The
// trackers and their records refer to an owner weakly, and an owner refers
// to no tracker strongly: a cache dropped with its handles is collected
// with them, and each handle it held is reported dropped. An owner keeps
// books of its own in each tracker it is used with.
//
// Set the fields before the first hand-over; do not copy an Owner.
type Owner struct {
	Name     string
	MaxBytes int64 // the owner's byte budget; 0 if it has none

	mu   sync.Mutex
	ties []ownerTie // its books, one per tracker that has listed it
}

// ownerTie is an owner's book in one tracker, which it knows weakly.
type ownerTie struct {
	tracker weak.Pointer[Tracker]
	book    *ownerBook
}

// maxOwnerSites bounds the lines an owner's figures keep apart; what
// further lines handed it is counted together.
const maxOwnerSites = 8

// ownerBook counts what one Owner holds in one tracker, by the line that
// made it. Records and the tracker point at the book, which points at the
// Owner and the tracker weakly, so that neither an Owner nor a tracker is
// kept alive by the other.
type ownerBook struct {
	owner   weak.Pointer[Owner]
	tracker weak.Pointer[Tracker]
	id      uint64 // the book's number in its tracker, from 1
	index   int    // its place in the tracker's registry; -1 once it left. Under the registry's lock
	name    string
	max     int64
	first   *Site // the line of the first hand-over

	// told has a bit for each site feed told of a change (feed.go).
	told atomic.Uint64

	mu    sync.Mutex
	bytes counter.Sum // exact, read held at MaxInt64
	count int64
	sites [maxOwnerSites]ownerSiteBook
	other ownerSiteBook
	gone  bool // the Owner was collected
}

// ownerSiteBook is what one line made that an owner holds, kept exactly.
type ownerSiteBook struct {
	site  *Site
	count int64
	bytes counter.Sum
}

// stats returns e as an OwnerSite.
func (e *ownerSiteBook) stats() OwnerSite {
	return OwnerSite{Site: e.site, Count: e.count, Bytes: max(e.bytes.Load(), 0)}
}

// OwnerSite is what one line made that an owner holds.
type OwnerSite struct {
	Site  *Site // nil for the lines past the bound, counted together
	Count int64
	Bytes int64
}

// bookIn returns o's book in t, nil if it has none.
func (o *Owner) bookIn(t *Tracker) *ownerBook {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, tie := range o.ties {
		if tie.tracker.Value() == t {
			return tie.book
		}
	}
	return nil
}

// bookFor returns o's book in t, made and listed at the first hand-over
// there, made at site. It forgets the books of trackers that were collected.
func (o *Owner) bookFor(t *Tracker, site *Site) *ownerBook {
	o.mu.Lock()
	defer o.mu.Unlock()
	live := o.ties[:0]
	var found *ownerBook
	for _, tie := range o.ties {
		tt := tie.tracker.Value()
		if tt == nil {
			continue
		}
		live = append(live, tie)
		if tt == t {
			found = tie.book
		}
	}
	clear(o.ties[len(live):])
	o.ties = live
	if found != nil {
		return found
	}
	b := &ownerBook{owner: weak.Make(o), tracker: weak.Make(t), name: o.Name, max: o.MaxBytes, first: site}
	o.ties = append(o.ties, ownerTie{tracker: b.tracker, book: b})
	t.owners.add(b)
	runtime.AddCleanup(o, (*ownerBook).ownerCollected, b)
	return b
}

// ownerCollected runs once the book's Owner is collected: a book that
// holds nothing leaves its tracker's registry then, without a reader; one
// that still holds tensors (their handles not yet found dropped) leaves
// when the last goes.
func (b *ownerBook) ownerCollected() {
	b.mu.Lock()
	b.gone = true
	empty := b.count == 0
	b.mu.Unlock()
	if empty {
		b.leave()
	}
}

// leave takes b out of its tracker's registry.
func (b *ownerBook) leave() {
	if t := b.tracker.Value(); t != nil {
		t.owners.remove(b)
	}
}

// add counts bytes and count (negative to take them back) made at site,
// and tells the site feeds that b changed.
func (b *ownerBook) add(site *Site, bytes, count int64) {
	b.mu.Lock()
	b.bytes.Add(bytes)
	b.count += count
	b.addSiteLocked(site, bytes, count)
	drop := b.gone && b.count == 0
	b.mu.Unlock()
	if t := b.tracker.Value(); t != nil {
		t.feeds.ownerChanged(b)
	}
	if drop {
		b.leave()
	}
}

func (b *ownerBook) addSiteLocked(site *Site, bytes, count int64) {
	free := -1
	for i := range b.sites {
		e := &b.sites[i]
		if e.site == site {
			e.count += count
			e.bytes.Add(bytes)
			if e.count == 0 {
				*e = ownerSiteBook{}
			}
			return
		}
		if e.site == nil && free < 0 {
			free = i
		}
	}
	if free >= 0 && count > 0 {
		b.sites[free] = ownerSiteBook{site: site, count: count}
		b.sites[free].bytes.Add(bytes)
		return
	}
	b.other.count += count
	b.other.bytes.Add(bytes)
}

// stats returns what b holds now; ok is false when it holds nothing.
func (b *ownerBook) stats() (s OwnerStats, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.count <= 0 {
		return OwnerStats{ID: b.id, Name: b.name, MaxBytes: b.max, First: b.first}, false
	}
	s = OwnerStats{ID: b.id, Name: b.name, MaxBytes: b.max, First: b.first, Count: b.count,
		Bytes: max(b.bytes.Load(), 0), Dropped: b.gone || b.owner.Value() == nil}
	for i := range b.sites {
		if e := &b.sites[i]; e.site != nil && e.count > 0 {
			s.Sites = append(s.Sites, e.stats())
		}
	}
	if b.other.count > 0 {
		s.Sites = append(s.Sites, b.other.stats())
	}
	slices.SortFunc(s.Sites, func(a, b OwnerSite) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(siteID(a.Site), siteID(b.Site)))
	})
	return s, true
}

// ownerRegistry is a tracker's list of owner books, in no order (readers
// sort). A book knows its place in the list, so that it leaves in O(1): a
// collection that finds 200k owners dropped runs 200k removals on the
// cleanup goroutine, each a swap with the last.
type ownerRegistry struct {
	mu     sync.Mutex
	books  []*ownerBook
	nextID uint64
}

func (r *ownerRegistry) add(b *ownerBook) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	b.id = r.nextID
	b.index = len(r.books)
	r.books = append(r.books, b)
}

func (r *ownerRegistry) remove(b *ownerBook) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := b.index
	if i < 0 || i >= len(r.books) || r.books[i] != b {
		return // not listed: removed already
	}
	last := len(r.books) - 1
	r.books[i] = r.books[last]
	r.books[i].index = i
	r.books[last] = nil
	r.books = r.books[:last]
	b.index = -1
	if cap(r.books) > 64 && len(r.books) < cap(r.books)/4 {
		r.books = slices.Clip(slices.Clone(r.books)) // give back what 200k dropped owners took
	}
}

// list returns the books, copied.
func (r *ownerRegistry) list() []*ownerBook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.books)
}

// OwnerStats is what one owner holds at one moment.
type OwnerStats struct {
	// ID tells owners apart in their tracker: two owners of one name are
	// two owners. It is the order in which they first took a tensor there.
	ID       uint64
	Name     string
	MaxBytes int64
	First    *Site       // the line of the owner's first hand-over in the tracker
	Count    int64       // the live tensors it holds
	Bytes    int64       // and their bytes
	Sites    []OwnerSite // the lines that made them, most bytes first
	Dropped  bool        // the Owner was collected while it held these
}

// OverBound reports whether the owner holds more than its MaxBytes.
func (s OwnerStats) OverBound() bool { return s.MaxBytes > 0 && s.Bytes > s.MaxBytes }

// Owners returns the owners that hold tensors of t now, most bytes first,
// from counters: O(owners).
func (t *Tracker) Owners() []OwnerStats {
	var out []OwnerStats
	for _, b := range t.owners.list() {
		if s, ok := b.stats(); ok {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b OwnerStats) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// HandOver gives the live record r to o: r no longer outlives its request
// while o holds it. Each HandOver is undone by one HandBack of the same
// owner (or HandBackDropped); r is held while any owner holds it, and
// counts as outlived then only if an owner without a bound holds it. After
// the last owner lets go, r is its request's again (outlived if the
// request has ended). A nil o, or r not live through t, is an error
// matching ErrMisuse.
//
//go:noinline
func (r *Record) HandOver(o *Owner) error {
	t, err := r.recorder()
	if err != nil {
		return err
	}
	if o == nil {
		t.misuse.Add(1)
		return errNilOwner
	}
	b := o.bookIn(t)
	if b == nil {
		// The owner's first hand-over in t: its line is the caller's
		// (tensor.Tensor.HandTo's caller, named past tensorlife's frames).
		b = o.bookFor(t, t.Books().CallerSite(0))
	}
	sh := &t.shards[r.id%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r.state() != stateLive {
		t.misuse.Add(1)
		return errReleased(r, "handed over")
	}
	var was bool
	if r.word.Load()&handedFlag == 0 {
		was = r.leave() // no longer in flight: its owners have it now
		r.word.Or(handedFlag)
	} else {
		was = r.word.Load()&outlivedFlag != 0
	}
	hs := r.holderSet()
	hs.mu.Lock()
	added := true
	for i, h := range hs.holds {
		if h.book == b {
			hs.holds[i].n++
			added = false
			break
		}
	}
	if added {
		hs.holds = append(hs.holds, ownerHold{book: b, n: 1})
	}
	now := hs.unboundedLocked()
	hs.mu.Unlock()
	if added {
		b.add(r.site, r.Bytes, 1)
	}
	t.setOutlivedLocked(r, was, now)
	return nil
}

// unboundedLocked reports whether an owner without a bound holds the
// record. Called with s.mu held.
func (s *holderSet) unboundedLocked() bool {
	for _, h := range s.holds {
		if h.book.max <= 0 {
			return true
		}
	}
	return false
}

// setOutlivedLocked moves r from outlived (was) to now in its flag and its
// site's figures. Called with r's shard lock held.
func (t *Tracker) setOutlivedLocked(r *Record, was, now bool) {
	if now {
		r.word.Or(outlivedFlag)
	} else {
		r.word.And(^uint32(outlivedFlag))
	}
	r.site.outlivedBy(was, now, r.Bytes)
}

// HandBack undoes one HandOver of the live record r to o: o lets go of it
// (a cache evicts it, closes, or drops the entry). Other owners' holds are
// theirs to end. After the last owner lets go, r is no longer held: it is
// in flight under its request again, or outlived if that request has ended
// or it had none. A record o does not hold is an error matching ErrMisuse.
func (r *Record) HandBack(o *Owner) error {
	t, err := r.recorder()
	if err != nil {
		return err
	}
	var b *ownerBook
	if o != nil {
		b = o.bookIn(t)
	}
	return t.handBack(r, func(h ownerHold) bool { return h.book == b })
}

// HandBackDropped ends one hold of the owner o on r, where o is known only
// weakly: the handle that kept the hold was found dropped by the collector
// (an owner is collected once no handle it holds is reachable, so o may be
// gone). It is HandBack for an allocator's drop path; a record o does not
// hold is an error matching ErrMisuse.
func (r *Record) HandBackDropped(o weak.Pointer[Owner]) error {
	t, err := r.recorder()
	if err != nil {
		return err
	}
	return t.handBack(r, func(h ownerHold) bool { return h.book.owner == o })
}

// handBack ends one hold of the owner whose hold is, on the live r.
func (t *Tracker) handBack(r *Record, is func(ownerHold) bool) error {
	sh := &t.shards[r.id%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r.state() != stateLive {
		t.misuse.Add(1)
		return errReleased(r, "handed back")
	}
	hs := r.holders.Load()
	if r.word.Load()&handedFlag == 0 || hs == nil {
		t.misuse.Add(1)
		return errNotHanded(r)
	}
	hs.mu.Lock()
	i := slices.IndexFunc(hs.holds, is)
	if i < 0 {
		hs.mu.Unlock()
		t.misuse.Add(1)
		return errNotHanded(r)
	}
	b := hs.holds[i].book
	hs.holds[i].n--
	gone := hs.holds[i].n == 0
	if gone {
		hs.holds = slices.Delete(hs.holds, i, i+1)
	}
	held, unbounded := len(hs.holds) > 0, hs.unboundedLocked()
	hs.mu.Unlock()
	if gone {
		b.add(r.site, -r.Bytes, -1)
	}
	was := r.word.Load()&outlivedFlag != 0
	if held {
		t.setOutlivedLocked(r, was, unbounded)
		return nil
	}
	r.word.And(^uint32(handedFlag | outlivedFlag))
	now := r.rejoin()
	if now && r.req == nil {
		r.word.Or(outlivedFlag)
	}
	r.site.outlivedBy(was, now, r.Bytes)
	return nil
}

// outlivedBy moves one record of bytes between the site's in-flight and
// outlived figures as its outlived state goes from was to now.
func (s *Site) outlivedBy(was, now bool, bytes int64) {
	switch {
	case was && !now:
		s.outlived(-bytes, -1)
	case !was && now:
		s.outlived(bytes, 1)
	}
}
