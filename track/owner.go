package track

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"weak"
)

// Owner holds tensors past their request on purpose: a cache, a session
// store (tensor.Tensor.HandTo). With MaxBytes > 0 what it holds is never
// judged by growth, and holding more is a leak suspect of its own
// (OwnerStats.OverBound); without, it is judged by growth, so an unbounded
// cache is still found. A tracker holds an owner weakly: one dropped with
// tensors still handed to it is collected, and each handle it held is
// reported dropped. Set the fields before the first hand-over; do not copy.
type Owner struct {
	Name     string
	MaxBytes int64                     // the owner's byte budget; 0 if it has none
	book     atomic.Pointer[ownerBook] // made at the first HandOver
}

// maxOwnerSites bounds the lines an owner's figures keep apart; what
// further lines handed it is counted together.
const maxOwnerSites = 8

// ownerBook counts what one Owner holds, by the line that made it. Records
// point at the book, never at the Owner, so that an Owner is not kept
// alive by what it owns.
type ownerBook struct {
	owner weak.Pointer[Owner]
	name  string
	max   int64

	mu           sync.Mutex
	bytes, count int64
	sites        [maxOwnerSites]OwnerSite
	other        OwnerSite
	trackers     []*Tracker // whose registries list the book
}

// OwnerSite is what one line made that an owner holds.
type OwnerSite struct {
	Site  *Site // nil for the lines past the bound, counted together
	Count int64
	Bytes int64
}

// bookFor returns o's book, listed in t's registry.
func (o *Owner) bookFor(t *Tracker) *ownerBook {
	b := o.book.Load()
	if b == nil {
		b = &ownerBook{owner: weak.Make(o), name: o.Name, max: o.MaxBytes}
		if !o.book.CompareAndSwap(nil, b) {
			b = o.book.Load()
		}
	}
	b.mu.Lock()
	listed := slices.Contains(b.trackers, t)
	if !listed {
		b.trackers = append(b.trackers, t)
	}
	b.mu.Unlock()
	if !listed {
		t.owners.add(b)
	}
	return b
}

// add counts bytes and count (negative to take them back) made at site.
func (b *ownerBook) add(site *Site, bytes, count int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bytes += bytes
	b.count += count
	free := -1
	for i := range b.sites {
		e := &b.sites[i]
		if e.Site == site {
			e.Count += count
			e.Bytes += bytes
			if e.Count == 0 {
				*e = OwnerSite{}
			}
			return
		}
		if e.Site == nil && free < 0 {
			free = i
		}
	}
	if free >= 0 && count > 0 {
		b.sites[free] = OwnerSite{Site: site, Count: count, Bytes: bytes}
		return
	}
	b.other.Count += count
	b.other.Bytes += bytes
}

// ownerRegistry is a tracker's list of owner books.
type ownerRegistry struct {
	mu    sync.Mutex
	books []*ownerBook
}

func (r *ownerRegistry) add(b *ownerBook) {
	r.mu.Lock()
	r.books = append(r.books, b)
	r.mu.Unlock()
}

// OwnerStats is what one owner holds at one moment.
type OwnerStats struct {
	Name     string
	MaxBytes int64
	Count    int64       // the live tensors handed to it
	Bytes    int64       // and their bytes
	Sites    []OwnerSite // the lines that made them, most bytes first
	Dropped  bool        // the Owner was collected while it held these
}

// OverBound reports whether the owner holds more than its MaxBytes.
func (s OwnerStats) OverBound() bool { return s.MaxBytes > 0 && s.Bytes > s.MaxBytes }

// Owners returns the owners that hold tensors of t now, most bytes first,
// from counters: O(owners).
func (t *Tracker) Owners() []OwnerStats {
	t.owners.mu.Lock()
	books := t.owners.books[:0:0]
	kept := t.owners.books[:0]
	for _, b := range t.owners.books {
		b.mu.Lock()
		gone := b.owner.Value() == nil && b.count == 0
		b.mu.Unlock()
		if !gone {
			kept = append(kept, b)
			books = append(books, b)
		}
	}
	clear(t.owners.books[len(kept):])
	t.owners.books = kept
	t.owners.mu.Unlock()

	var out []OwnerStats
	for _, b := range books {
		b.mu.Lock()
		if b.count > 0 {
			s := OwnerStats{Name: b.name, MaxBytes: b.max, Count: b.count, Bytes: b.bytes,
				Dropped: b.owner.Value() == nil}
			for _, e := range b.sites {
				if e.Site != nil && e.Count > 0 {
					s.Sites = append(s.Sites, e)
				}
			}
			if b.other.Count > 0 {
				s.Sites = append(s.Sites, b.other)
			}
			slices.SortFunc(s.Sites, func(a, b OwnerSite) int {
				return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(siteID(a.Site), siteID(b.Site)))
			})
			out = append(out, s)
		}
		b.mu.Unlock()
	}
	slices.SortStableFunc(out, func(a, b OwnerStats) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return out
}

// HandOver gives the live record r to o: r no longer outlives its request
// while o holds it. Each HandOver is undone by one HandBack: after the last,
// r is its request's again (outlived if the request has ended). A nil o,
// or r not live through t, is an error matching ErrMisuse.
func (t *Tracker) HandOver(r *Record, o *Owner) error {
	if err := t.owns(r, "handed over"); err != nil {
		return err
	}
	if o == nil {
		t.misuse.Add(1)
		return errNilOwner
	}
	b := o.bookFor(t)
	sh := &t.shards[r.id%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r.state() != stateLive {
		t.misuse.Add(1)
		return errReleased(r, "handed over")
	}
	was := r.leave() // no longer in flight: its owner has it now
	hs := r.holderSet()
	hs.mu.Lock()
	prev := hs.owner
	hs.owner = b
	hs.handovers++
	hs.mu.Unlock()
	if prev != nil {
		prev.add(r.site, -r.Bytes, -1)
	}
	b.add(r.site, r.Bytes, 1)
	now := b.max <= 0
	if now {
		r.word.Or(handedFlag | outlivedFlag)
	} else {
		r.word.Or(handedFlag)
		r.word.And(^uint32(outlivedFlag))
	}
	r.site.outlivedBy(was, now, r.Bytes)
	return nil
}

// HandBack undoes one HandOver of the live record r: an owner lets go of
// it (a cache evicts it, closes, or drops the entry). After the last, r is
// no longer its owner's: it is in flight under its request again, or
// outlived if that request has ended or it had none. A record not handed
// over is an error matching ErrMisuse.
func (t *Tracker) HandBack(r *Record) error {
	if err := t.owns(r, "handed back"); err != nil {
		return err
	}
	sh := &t.shards[r.id%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r.state() != stateLive {
		t.misuse.Add(1)
		return errReleased(r, "handed back")
	}
	if r.word.Load()&handedFlag == 0 {
		t.misuse.Add(1)
		return errNotHanded(r)
	}
	t.handBackLocked(r)
	return nil
}

// handBackLocked is HandBack with r's shard lock held and r handed over.
func (t *Tracker) handBackLocked(r *Record) {
	hs := r.holderSet()
	hs.mu.Lock()
	if hs.handovers--; hs.handovers > 0 {
		hs.mu.Unlock()
		return
	}
	b := hs.owner
	hs.owner = nil
	hs.mu.Unlock()
	if b != nil {
		b.add(r.site, -r.Bytes, -1)
	}
	was := r.word.Load()&outlivedFlag != 0
	r.word.And(^uint32(handedFlag | outlivedFlag))
	now := r.rejoin()
	if now && r.req == nil {
		r.word.Or(outlivedFlag)
	}
	r.site.outlivedBy(was, now, r.Bytes)
}

// releaseToDeadOwner hands r back when the owner it was handed to has been
// collected: a handle of r was found dropped, and nothing holds r for that
// owner any more. Called with r's shard lock held.
func (t *Tracker) releaseToDeadOwner(r *Record) {
	s := r.handedSet()
	if s == nil {
		return
	}
	s.mu.Lock()
	dead := s.owner != nil && s.owner.owner.Value() == nil
	if dead {
		s.handovers = 1 // every HandOver of a collected owner is over
	}
	s.mu.Unlock()
	if dead {
		t.handBackLocked(r)
	}
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
