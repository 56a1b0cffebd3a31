package track

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// maxFeeds bounds the site feeds of one tracker that are told of changes;
// a further feed scans every site at each call instead.
const maxFeeds = 64

// feedSet is a tracker's site feeds: a site whose outlived figures change
// is queued once for every feed that has not read it since, so a feed's
// call costs O(sites that changed), not O(sites).
type feedSet struct {
	mu    sync.Mutex // guards used
	used  uint64
	mask  atomic.Uint64 // the feeds being told, a bit each
	slots [maxFeeds]feedSlot
}

type feedSlot struct {
	mu      sync.Mutex
	pending []*Site
	owners  []*ownerBook // the owners changed since the feed's last read
	// pendingQueued and ownersQueued are set when pending and owners are
	// not empty, so that a read of a window in which nothing changed takes
	// no lock.
	pendingQueued atomic.Bool
	ownersQueued  atomic.Bool
}

// changed queues s, whose outlived figures changed, for every feed not yet
// told of it: one atomic load when every feed has been told already.
func (fs *feedSet) changed(s *Site) {
	m := fs.mask.Load()
	if m == 0 || s.told.Load()&m == m {
		return
	}
	for newly := m &^ s.told.Or(m); newly != 0; newly &= newly - 1 {
		sl := &fs.slots[bits.TrailingZeros64(newly)]
		sl.mu.Lock()
		sl.pending = append(sl.pending, s)
		sl.pendingQueued.Store(true)
		sl.mu.Unlock()
	}
}

// ownerChanged queues b, whose figures changed, for every feed not yet told
// of it, as changed does for a site.
func (fs *feedSet) ownerChanged(b *ownerBook) {
	m := fs.mask.Load()
	if m == 0 || b.told.Load()&m == m {
		return
	}
	for newly := m &^ b.told.Or(m); newly != 0; newly &= newly - 1 {
		sl := &fs.slots[bits.TrailingZeros64(newly)]
		sl.mu.Lock()
		sl.owners = append(sl.owners, b)
		sl.ownersQueued.Store(true)
		sl.mu.Unlock()
	}
}

// siteFeed reports the sites whose outlived figures changed, in time that
// grows with those alone (track.SiteFeed). For one goroutine at a
// time.
type siteFeed struct {
	t           *Tracker
	slot        int // -1: no slot was free, every call scans
	first       bool
	firstOwners bool
}

// siteFeedOf returns a new feed of t's sites; its owner closes it, or a
// cleanup of the owner does.
func (t *Tracker) siteFeedOf() *siteFeed {
	f := &siteFeed{t: t, slot: -1, first: true, firstOwners: true}
	fs := t.feeds
	fs.mu.Lock()
	if free := ^fs.used; free != 0 {
		f.slot = bits.TrailingZeros64(free)
		fs.used |= 1 << f.slot
		fs.mask.Or(1 << f.slot)
	}
	fs.mu.Unlock()
	return f
}

// Changed appends to dst the sites changed since the last call (on the
// first, all that allocated).
//
// A reader never waits on the record path for longer than one record's
// update: it takes each lock it needs once (a request book shard's, each
// ended request's, its slot's), each a sync.Mutex that hands itself to a
// waiter kept waiting over a millisecond, holds none of them while it
// takes another, and retries nothing: no loop here waits for writers to
// stop. Its cost is the requests that ended since the last read and the
// sites that changed, however fast records churn meanwhile; a change made
// after its read of a site queues the site again for the next call.
func (sf *siteFeed) changed(dst []SiteStats) []SiteStats {
	t := sf.t
	t.sweep() // requests whose contexts are done count as ended before the read
	if sf.slot < 0 || sf.first {
		sf.first = false
		sites := t.stacks.sites()
		if sf.slot >= 0 {
			// Every site is read below: what was queued before is read
			// with it, and goes. Told bits first, so that a change after a
			// site's read queues it again.
			bit := uint64(1) << sf.slot
			for _, s := range sites {
				s.told.And(^bit)
			}
			sl := &t.feeds.slots[sf.slot]
			sl.mu.Lock()
			sl.pending = nil
			sl.pendingQueued.Store(false)
			sl.mu.Unlock()
		}
		for _, s := range sites {
			if s.metas.allocated() > 0 {
				dst = append(dst, s.Stats())
			}
		}
		return dst
	}
	sl := &t.feeds.slots[sf.slot]
	if !sl.pendingQueued.Load() {
		return dst // no site changed: no lock taken
	}
	sl.mu.Lock()
	pending := sl.pending
	sl.pending = nil
	sl.pendingQueued.Store(false)
	sl.mu.Unlock()
	bit := uint64(1) << sf.slot
	for _, s := range pending {
		s.told.And(^bit) // before reading: a later change queues s again
		dst = append(dst, s.Stats())
	}
	return dst
}

// changedOwners appends to dst the owners whose figures changed since the
// last call (on the first, every owner listed), those that hold nothing
// now included (Count 0).
func (sf *siteFeed) changedOwners(dst []OwnerStats) []OwnerStats {
	t := sf.t
	var books []*ownerBook
	if sf.slot < 0 || sf.firstOwners {
		sf.firstOwners = false
		books = t.owners.list()
		if sf.slot >= 0 {
			// As for sites (changed): every book is read below, so what
			// was queued before goes, its told bits cleared first.
			bit := uint64(1) << sf.slot
			for _, b := range books {
				b.told.And(^bit)
			}
			sl := &t.feeds.slots[sf.slot]
			sl.mu.Lock()
			sl.owners = nil
			sl.ownersQueued.Store(false)
			sl.mu.Unlock()
		}
	} else {
		sl := &t.feeds.slots[sf.slot]
		if !sl.ownersQueued.Load() {
			return dst // no owner changed: no lock taken
		}
		sl.mu.Lock()
		books = sl.owners
		sl.owners = nil
		sl.ownersQueued.Store(false)
		sl.mu.Unlock()
		bit := uint64(1) << sf.slot
		for _, b := range books {
			b.told.And(^bit) // before reading: a later change queues b again
		}
	}
	for _, b := range books {
		s, _ := b.stats()
		dst = append(dst, s)
	}
	return dst
}

func (f *siteFeed) close() {
	if f.slot < 0 {
		return
	}
	fs := f.t.feeds
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.used&(1<<f.slot) == 0 {
		return
	}
	fs.mask.And(^uint64(1 << f.slot))
	sl := &fs.slots[f.slot]
	sl.mu.Lock()
	sl.pending, sl.owners = nil, nil
	sl.pendingQueued.Store(false)
	sl.ownersQueued.Store(false)
	sl.mu.Unlock()
	fs.used &^= 1 << f.slot
	f.slot = -1
}

// Stats reads the site's counters, O(shapes); Oldest is not filled.
func (s *Site) Stats() SiteStats {
	allocs, frees, allocBytes, freed := s.metas.figures()
	outlived, outlivedBytes, handles, handleBytes := s.outlivedFigures()
	return SiteStats{Site: s, LiveCount: counter.Live(allocs, frees), LiveBytes: live(allocBytes, freed),
		AllocCount: counter.Held(allocs), AllocBytes: allocBytes.Load(), GCLeaks: s.gcLeaks.Load(),
		OutlivedCount: counter.Held(outlived), OutlivedBytes: max(outlivedBytes.Load(), 0),
		OutlivedHandles: counter.Held(handles), OutlivedHandleBytes: max(handleBytes.Load(), 0)}
}
