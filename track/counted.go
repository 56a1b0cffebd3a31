package track

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// A site's figures live in counters kept on the record path, so that a
// scrape of the default profile (no filter but the label keys it shows, and
// none of those), Stats and the out-of-memory error cost O(sites × shapes),
// never O(live tensors).
//
// Every site counts its records by Meta and byte size in up to maxSiteMetas
// slots, claimed on first use and kept: a slot counts only the records it
// has seen made and released, one atomic add each, and its bytes are that
// count times the slot's size. The slots are the site's exact figures
// (Site.Stats sums them) and the profile's groups alike.
//
// The bound: a site keeps at most maxSiteMetas distinct (Meta, bytes)
// values apart; a record of a further one (a KV cache whose shape follows
// the sequence length) is counted in the site's other-shapes counters, two
// atomic adds at Record and two at Release instead of one each, and the
// profile shows it in one group marked Group.OtherShapes. The site's
// figures stay exact either way; what the profile shows per shape is
// bounded by maxSiteMetas + 1 groups per site, and a record costs at most
// inlineMetas slot compares and one map lookup to place.
//
// A record whose holders make it a group of its own (its own handle freed
// while a View or Retain holds it, or a handle the collector found dropped)
// is special: it stays counted in its slot, which counts it as moved, and
// its shard keeps it in a set, which the snapshot walks alone.

const (
	inlineMetas  = 4  // the slots every site has
	maxSiteMetas = 64 // the slots a site may have
)

// slotKey is what a slot counts: records of one Meta and byte size.
type slotKey struct {
	meta  *Meta
	bytes int64
}

// metaCount is one slot. Live records are allocs - frees; of those, moved
// are counted in their shard's special set. size is the key's bytes,
// stored before the key is: a reader that sees the key multiplies by it
// without following the key's pointer, one cache line fewer a slot.
type metaCount struct {
	key                  atomic.Pointer[slotKey]
	size                 atomic.Int64
	allocs, frees, moved atomic.Int64
	claiming             atomic.Bool // set by the one goroutine claiming it
}

// otherCount are a site's records past its slots, of any Meta and size:
// the bytes of those below wideRecord, the counts of all (site.go).
type otherCount struct {
	allocs, allocBytes, frees, freedBytes, moved, movedBytes atomic.Int64
}

// siteMetas are a site's counters by Meta and size.
type siteMetas struct {
	other  otherCount
	inline [inlineMetas]metaCount
	more   atomic.Pointer[[maxSiteMetas - inlineMetas]metaCount]
	index  atomic.Pointer[map[slotKey]int] // the keys of more: replaced whole, under mu
	mu     sync.Mutex                      // claims past the inline slots
	wide   atomic.Pointer[siteWide]        // byte sums of records of wideRecord bytes or more (site.go)
}

// matches reports whether c is the slot of m and bytes, claiming it when
// free. A goroutine that finds it being claimed waits the moment the
// claimer takes to publish the key: once per slot.
func (c *metaCount) matches(m *Meta, bytes int64) bool {
	p := c.key.Load()
	for p == nil {
		if c.claiming.CompareAndSwap(false, true) {
			c.size.Store(bytes)
			c.key.Store(&slotKey{meta: m, bytes: bytes})
			return true
		}
		runtime.Gosched()
		p = c.key.Load()
	}
	return p.meta == m && p.bytes == bytes
}

// slot returns the index of the slot of m and bytes, claiming a free one;
// otherSlot when every slot holds another key. Lock-free but for a claim
// past the inline slots: a slot, once claimed, keeps its key. Slots are
// claimed in order, so the first keys a site sees keep theirs; past the
// inline ones a key is found through an index rebuilt at each claim (at
// most maxSiteMetas - inlineMetas times per site), so that a site with
// many shapes places each record in one map lookup, not a scan.
func (sm *siteMetas) slot(m *Meta, bytes int64) int {
	for i := range sm.inline {
		if sm.inline[i].matches(m, bytes) {
			return i
		}
	}
	if idx := sm.index.Load(); idx != nil {
		if i, ok := (*idx)[slotKey{meta: m, bytes: bytes}]; ok {
			return i
		}
		if len(*idx) == maxSiteMetas-inlineMetas {
			return otherSlot
		}
	}
	return sm.claimMore(m, bytes)
}

// claimMore claims the next slot past the inline ones for m and bytes,
// unless another goroutine did or none is left.
func (sm *siteMetas) claimMore(m *Meta, bytes int64) int {
	key := slotKey{meta: m, bytes: bytes}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	var idx map[slotKey]int
	if p := sm.index.Load(); p != nil {
		idx = *p
	}
	if i, ok := idx[key]; ok {
		return i
	}
	n := len(idx)
	if n == maxSiteMetas-inlineMetas {
		return otherSlot
	}
	more := sm.more.Load()
	if more == nil {
		more = new([maxSiteMetas - inlineMetas]metaCount)
		sm.more.Store(more)
	}
	more[n].size.Store(bytes) // before the key, as matches does
	more[n].key.Store(&key)
	next := make(map[slotKey]int, n+1)
	for k, v := range idx {
		next[k] = v
	}
	next[key] = inlineMetas + n
	sm.index.Store(&next)
	return inlineMetas + n
}

// at returns slot i, nil when it does not exist.
func (sm *siteMetas) at(i int) *metaCount {
	if i < inlineMetas {
		return &sm.inline[i]
	}
	more := sm.more.Load()
	if more == nil {
		return nil
	}
	return &more[i-inlineMetas]
}

// slots calls f for each claimed slot and its key.
func (sm *siteMetas) slots(f func(c *metaCount, k *slotKey)) {
	for i := range sm.inline {
		k := sm.inline[i].key.Load()
		if k == nil {
			return // claimed in order: the rest, and those past them, are free
		}
		f(&sm.inline[i], k)
	}
	if more := sm.more.Load(); more != nil {
		for i := range more {
			k := more[i].key.Load()
			if k == nil {
				break // claimed in order too
			}
			f(&more[i], k)
		}
	}
}

// A slot's live count is two counters, made and released, each one word:
// a reader that read them one after the other, and was paused between the
// two, would count every record made meanwhile as live (an out-of-memory
// error once named a line that holds one record at a time as holding
// 2,000). So each slot is read on its own, made, released and made again,
// and read again if made moved: the released figure then belongs to a
// moment when made was what was read, and the live figure is one moment's.
// A record's update takes far longer than the three loads, so a retry is
// rare; past maxReadTries the last read stands, which can count only the
// records made during its three loads.
const maxReadTries = 16

// betweenReads, set by tests of this package only, is called by a slot's
// and the other shapes' read, with the made counter being read, between
// their first load of it and their load of released: where a reader may
// be paused, so that a test can make and release records there. nil (one
// load) in every program.
var betweenReads atomic.Pointer[func(made *atomic.Int64)]

// read returns c's made, released and moved records at one moment (see
// maxReadTries).
func (c *metaCount) read() (allocs, frees, moved int64) {
	for range maxReadTries {
		allocs = c.allocs.Load()
		if f := betweenReads.Load(); f != nil {
			(*f)(&c.allocs)
		}
		frees, moved = c.frees.Load(), c.moved.Load()
		if c.allocs.Load() == allocs {
			return allocs, frees, moved
		}
	}
	return allocs, frees, moved
}

// read returns o's figures at one moment, as metaCount.read.
func (o *otherCount) read() (allocs, allocBytes, frees, freedBytes, moved, movedBytes int64) {
	for range maxReadTries {
		allocs, allocBytes = o.allocs.Load(), o.allocBytes.Load()
		if f := betweenReads.Load(); f != nil {
			(*f)(&o.allocs)
		}
		frees, freedBytes = o.frees.Load(), o.freedBytes.Load()
		moved, movedBytes = o.moved.Load(), o.movedBytes.Load()
		if o.allocBytes.Load() == allocBytes && o.allocs.Load() == allocs {
			break
		}
	}
	return allocs, allocBytes, frees, freedBytes, moved, movedBytes
}

// otherFigures returns the other shapes' made, released and moved
// records and bytes at one moment (otherCount.read, under the wide part's
// lock), the bytes exact.
func (sm *siteMetas) otherFigures() (allocs, frees, moved int64, made, freed, movedBytes counter.Sum) {
	sm.readWide(func(w *siteWide) {
		var ab, fb, mb int64
		allocs, ab, frees, fb, moved, mb = sm.other.read()
		made, freed, movedBytes = counter.Sum{}, counter.Sum{}, counter.Sum{}
		made.AddUint(uint64(ab)) // below 2^64: see wideRecord
		freed.AddUint(uint64(fb))
		movedBytes.AddUint(uint64(mb))
		if w != nil {
			made.AddSum(w.otherMade)
			freed.AddSum(w.otherFreed)
			movedBytes.AddSum(w.otherMoved)
		}
	})
	return allocs, frees, moved, made, freed, movedBytes
}

// figures returns the site's made and released records and bytes, each
// slot's read at one moment (metaCount.read), so that a live figure read
// this way is never negative and never counts what was made during the
// read; the bytes are exact (a slot's count × its size in 128 bits).
func (sm *siteMetas) figures() (allocs, frees int64, allocBytes, freedBytes counter.Sum) {
	allocs, frees, _, allocBytes, freedBytes, _ = sm.otherFigures()
	sm.slots(func(c *metaCount, _ *slotKey) {
		a, f, _ := c.read()
		size := c.size.Load()
		allocs += a
		allocBytes.AddMul(a, size)
		frees += f
		freedBytes.AddMul(f, size)
	})
	return allocs, frees, allocBytes, freedBytes
}

// live returns made - freed held in [0, MaxInt64].
func live(made, freed counter.Sum) int64 {
	made.SubSum(freed)
	return max(made.Load(), 0)
}

// allocated reports the records ever made at the site.
func (sm *siteMetas) allocated() int64 {
	n := sm.other.allocs.Load()
	sm.slots(func(c *metaCount, _ *slotKey) { n += c.allocs.Load() })
	return n
}

// made counts a record of bytes made in slot i.
func (sm *siteMetas) made(i int, bytes int64) {
	if i == otherSlot {
		if wide(bytes) {
			w := sm.wideOf()
			w.mu.Lock()
			sm.other.allocs.Add(1)
			w.otherMade.Add(bytes)
			w.mu.Unlock()
			return
		}
		sm.other.allocs.Add(1)
		sm.other.allocBytes.Add(bytes)
		return
	}
	sm.at(i).allocs.Add(1)
}

// released counts a record of bytes released from slot i; special says it
// was counted as moved.
func (sm *siteMetas) released(i int, bytes int64, special bool) {
	if i == otherSlot {
		if wide(bytes) {
			w := sm.wideOf()
			w.mu.Lock()
			if special {
				sm.other.moved.Add(-1)
				w.otherMoved.Add(-bytes)
			}
			sm.other.frees.Add(1)
			w.otherFreed.Add(bytes)
			w.mu.Unlock()
			return
		}
		if special {
			sm.other.moved.Add(-1)
			sm.other.movedBytes.Add(-bytes)
		}
		sm.other.frees.Add(1)
		sm.other.freedBytes.Add(bytes)
		return
	}
	c := sm.at(i)
	if special {
		c.moved.Add(-1)
	}
	c.frees.Add(1)
}

func (r *Record) slot() int { return int(r.word.Load()&slotMask) >> slotShift }

func (sh *shardData) addSpecial(r *Record) {
	if sh.special == nil {
		sh.special = make(map[*Record]struct{})
	}
	sh.special[r] = struct{}{}
}

// makeSpecial counts the live record r apart from its site's slot, in its
// shard's special records: its holders or leaked flag now set it apart.
func (t *Tracker) makeSpecial(r *Record) {
	if r.word.Load()&specialFlag != 0 {
		return
	}
	sh := &t.shards[r.id%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	w := r.word.Load()
	if w&specialFlag != 0 || w&stateMask != stateLive {
		return
	}
	r.word.Or(specialFlag)
	if i := r.slot(); i == otherSlot {
		sm := &r.site.metas
		if wide(r.Bytes) {
			w := sm.wideOf()
			w.mu.Lock()
			sm.other.moved.Add(1)
			w.otherMoved.Add(r.Bytes)
			w.mu.Unlock()
		} else {
			sm.other.moved.Add(1)
			sm.other.movedBytes.Add(r.Bytes)
		}
	} else {
		r.site.metas.at(i).moved.Add(1)
	}
	sh.addSpecial(r)
}

// counted reports whether a snapshot of f can be read from counters: the
// default profile's, with no filter and grouped by no label.
func (f Filter) counted() bool {
	return f.MinAge == 0 && !f.Outlived && !f.InFlight && f.Request == nil && f.Kind == "" && f.Device == "" &&
		!f.LeakedOnly && len(f.Labels) == 0 && !f.Allocations && !f.Oldest && f.LabelKeys != nil &&
		len(f.LabelKeys) == 0
}

// counts are the counters the default profile's snapshot is read from,
// copied at one moment (Books.CopyCounts), for a caller that must not
// wait for the snapshot itself: the allocation that just failed, whose
// dump needs the live set as it was then. They are immutable.
type counts struct {
	tracker *Tracker
	time    time.Time
	totals  Totals
	sites   []countedSite
	slots   []countedSlot // the sites' live groups, in the order of sites
	special []Group
}

// countedSite is one site's figures, and how many of counts.slots are its.
type countedSite struct {
	site                                                      *Site
	allocs, allocBytes, gcLeaks, outlivedCount, outlivedBytes int64
	slots                                                     int
}

// countedSlot is the live count and bytes of one Meta at a site; a nil
// meta stands for the site's other shapes.
type countedSlot struct {
	meta         *Meta
	count, bytes int64
}

// counts copies the counters of the default profile's snapshot: O(sites ×
// shapes + special records), two allocations of about 80 bytes a site, no
// walk of the live set, and each shard's lock held only to copy the
// pointers of its special records. Its snapshot is SnapshotOf(Filter{LabelKeys: []string{}})
// as it would have been when counts ran.
func (t *Tracker) counts() *counts {
	c := &counts{tracker: t, totals: t.Totals(), time: t.Now()} // Totals sweeps the requests
	sites := t.stacks.sites()
	c.sites = make([]countedSite, 0, len(sites))
	c.slots = make([]countedSlot, 0, len(sites)+1)
	for _, s := range sites {
		outlivedCount, outlivedBytes, _, _ := s.outlivedFigures()
		cs := countedSite{site: s, gcLeaks: s.gcLeaks.Load(), outlivedCount: counter.Held(outlivedCount),
			outlivedBytes: outlivedBytes.Load()}
		first := len(c.slots)
		add := func(m *Meta, n, bytes int64) {
			for i := first; i < len(c.slots) && m != nil; i++ { // one Meta in slots of several sizes: one group
				if c.slots[i].meta == m {
					c.slots[i].count += n
					c.slots[i].bytes = counter.AddSat(c.slots[i].bytes, bytes)
					return
				}
			}
			c.slots = append(c.slots, countedSlot{meta: m, count: n, bytes: bytes})
		}
		var allocBytes counter.Sum
		// One pass: each slot read at one moment (metaCount.read).
		for i := range maxSiteMetas {
			sl := s.metas.at(i)
			if sl == nil {
				break
			}
			k := sl.key.Load()
			if k == nil {
				break // claimed in order
			}
			allocs, frees, moved := sl.read()
			cs.allocs += allocs
			allocBytes.AddMul(allocs, k.bytes)
			if n := allocs - frees - moved; n > 0 {
				var b counter.Sum
				b.AddMul(n, k.bytes)
				add(k.meta, n, b.Load())
			}
		}
		allocs, frees, moved, made, freed, movedBytes := s.metas.otherFigures()
		cs.allocs += allocs
		allocBytes.AddSum(made)
		if n := allocs - frees - moved; n > 0 {
			freed.AddSum(movedBytes)
			add(nil, n, live(made, freed))
		}
		cs.allocBytes = allocBytes.Load()
		if cs.allocs == 0 {
			continue
		}
		cs.slots = len(c.slots) - first
		c.sites = append(c.sites, cs)
	}
	c.special = t.specialGroups()
	return c
}

// snapshot builds c's snapshot under the counted filter f: every call
// returns a snapshot of its own, of the moment c was taken. Groups have no
// Oldest but the special records'.
func (c *counts) snapshot(f Filter) *Snapshot {
	t := c.tracker
	snap := &Snapshot{Tracker: t, TrackerName: t.cfg.name, Time: c.time, Totals: c.totals, Filter: f}
	groups := make([]Group, 0, len(c.slots)+len(c.special))
	stats := make([]SiteStats, 0, len(c.sites))
	index := make(map[*Site]int, len(c.sites))
	slots := c.slots
	for _, cs := range c.sites {
		st := SiteStats{Site: cs.site, AllocCount: cs.allocs, AllocBytes: cs.allocBytes, GCLeaks: cs.gcLeaks,
			OutlivedCount: cs.outlivedCount, OutlivedBytes: cs.outlivedBytes}
		first := len(groups)
		for _, sl := range slots[:cs.slots] {
			st.LiveCount += sl.count
			st.LiveBytes = counter.AddSat(st.LiveBytes, sl.bytes)
			g := Group{Site: cs.site, Count: sl.count, Bytes: sl.bytes, OtherShapes: sl.meta == nil}
			if m := sl.meta; m != nil {
				g.Kind, g.Device, g.DType, g.Shape = m.Kind, m.Device, m.DType, m.Shape
			}
			groups = append(groups, g)
		}
		slots = slots[cs.slots:]
		if len(groups)-first > 1 {
			sortGroups(groups[first:])
		}
		index[cs.site] = len(stats)
		stats = append(stats, st)
	}
	if len(c.special) > 0 {
		for _, g := range c.special {
			if i, ok := index[g.Site]; ok {
				st := &stats[i] // outlived figures are the site's counters already
				st.LiveCount += g.Count
				st.LiveBytes = counter.AddSat(st.LiveBytes, g.Bytes)
				if st.Oldest.IsZero() || g.Oldest.Before(st.Oldest) {
					st.Oldest = g.Oldest
				}
			}
		}
		groups = append(groups, c.special...)
		sortGroups(groups) // else in order already: by site, then bytes
	}
	sortSites(stats)
	snap.Groups, snap.Sites = groups, stats
	return snap
}

// specialGroups returns the groups of the shards' special records.
func (t *Tracker) specialGroups() []Group {
	// Each shard's lock is held to copy its special records' pointers,
	// not to read them: reading a record takes its holder set's lock.
	var recs []*Record
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for r := range sh.special {
			recs = append(recs, r)
		}
		sh.mu.Unlock()
	}
	if len(recs) == 0 {
		return nil
	}
	groups := newGrouper(Filter{LabelKeys: []string{}})
	for _, r := range recs {
		if r.state() != stateLive {
			continue // released since: its slot no longer counts it either
		}
		m := metaOf(r)
		var held *Holder
		if h, ok := r.heldBy(); ok {
			held = &h
		}
		var nLeaked int64
		if r.leaked() {
			nLeaked = 1
		}
		groups.addN(r.site, m, Labels{}, held, 1, r.Bytes, nLeaked,
			r.outlived(), r.time())
	}
	return groups.finish(map[*Site]*SiteStats{})
}
