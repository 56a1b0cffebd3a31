package track

import (
	"sync"
	"sync/atomic"
	"time"
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
// the sequence length) is counted in the site's other-shapes counters, four
// atomics instead of one, and the profile shows it in one group marked
// Group.OtherShapes. The site's figures stay exact either way; what the
// profile shows per shape is bounded by maxSiteMetas + 1 groups per site,
// and a record with many shapes costs at most inlineMetas + moreProbes slot
// compares to place.
//
// A record whose holders make it a group of its own (its own handle freed
// while a View or Retain holds it, or a handle the collector found dropped)
// is special: it stays counted in its slot, which counts it as moved, and
// its shard keeps it in a set, which the snapshot walks alone.

const (
	inlineMetas  = 4  // the slots every site has
	maxSiteMetas = 64 // the slots a site may have
	otherSlot    = 0x7f
	slotShift    = 8 // a record's slot in its word: bits 8..14
	slotMask     = 0x7f << slotShift
	specialFlag  = 1 << 15 // counted apart in its shard's special set
)

// slotKey is what a slot counts: records of one Meta and byte size.
type slotKey struct {
	meta  *Meta
	bytes int64
}

// metaCount is one slot. Live records are allocs - frees; of those, moved
// are counted in their shard's special set.
type metaCount struct {
	key                  atomic.Pointer[slotKey]
	allocs, frees, moved atomic.Int64
}

// otherCount are a site's records past its slots, of any Meta and size.
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
}

// matches reports whether c is the slot of m and bytes, claiming it when
// free (k is the key to claim it with, made once per slot call).
func (c *metaCount) matches(m *Meta, bytes int64, k **slotKey) bool {
	p := c.key.Load()
	if p == nil {
		if *k == nil {
			*k = &slotKey{meta: m, bytes: bytes}
		}
		if c.key.CompareAndSwap(nil, *k) {
			return true
		}
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
	var k *slotKey
	for i := range sm.inline {
		if sm.inline[i].matches(m, bytes, &k) {
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
			break // claimed in order: the rest are free
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

// figures returns the site's made and released records and bytes: frees
// are read first, so that live figures read this way are never negative.
func (sm *siteMetas) figures() (allocs, allocBytes, frees, freedBytes int64) {
	frees, freedBytes = sm.other.frees.Load(), sm.other.freedBytes.Load()
	sm.slots(func(c *metaCount, k *slotKey) {
		n := c.frees.Load()
		frees += n
		freedBytes += n * k.bytes
	})
	allocs, allocBytes = sm.other.allocs.Load(), sm.other.allocBytes.Load()
	sm.slots(func(c *metaCount, k *slotKey) {
		n := c.allocs.Load()
		allocs += n
		allocBytes += n * k.bytes
	})
	return allocs, allocBytes, frees, freedBytes
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
		r.site.metas.other.moved.Add(1)
		r.site.metas.other.movedBytes.Add(r.Bytes)
	} else {
		r.site.metas.at(i).moved.Add(1)
	}
	sh.addSpecial(r)
}

// counted reports whether a snapshot of f can be read from counters: the
// default profile's, with no filter and grouped by no label.
func (f Filter) counted() bool {
	return f.MinAge == 0 && !f.Outlived && f.Request == nil && f.Kind == "" && f.Device == "" &&
		!f.LeakedOnly && len(f.Labels) == 0 && !f.Allocations && !f.Oldest && f.LabelKeys != nil &&
		len(f.LabelKeys) == 0
}

// countedSnapshot is SnapshotOf for a counted filter: the sites' slots
// and the shards' special records, O(sites × shapes + special records),
// in a handful of allocations whatever the sites hold, since it may run on
// an allocation that just failed, where every allocation of a large heap
// pays the collector's assist. The slots are read without locks, each
// exact, not all at one instant; their groups have no Oldest. Each shard's
// lock is held while its special records are read, not longer.
func (t *Tracker) countedSnapshot(f Filter, now time.Time) *Snapshot {
	snap := &Snapshot{tracker: t, TrackerName: t.cfg.name, Time: now, Totals: t.Totals(), Filter: f}
	sites := t.stacks.sites()
	stats := make([]SiteStats, 0, len(sites))
	groups := make([]Group, 0, len(sites)+1)
	var metas []*Meta                  // the Meta of each group of the site being read
	index := make([]int32, len(sites)) // a site's entry in stats, by site id
	for _, s := range sites {
		if s.id >= len(index) {
			continue // made since sites was read: nothing of it is counted
		}
		index[s.id] = -1
		st := SiteStats{Site: s, GCLeaks: s.gcLeaks.Load(), OutlivedCount: s.outlivedCount.Load(),
			OutlivedBytes: s.outlivedBytes.Load()}
		first := len(groups)
		metas = metas[:0]
		count := func(m *Meta, otherShapes bool, n, bytes int64) {
			st.LiveCount += n
			st.LiveBytes += bytes
			for i, seen := range metas { // one Meta in slots of several sizes: one group
				if seen == m && !otherShapes {
					groups[first+i].Count += n
					groups[first+i].Bytes += bytes
					return
				}
			}
			metas = append(metas, m)
			g := Group{Site: s, Count: n, Bytes: bytes, OtherShapes: otherShapes}
			if !otherShapes {
				g.Kind, g.Device, g.DType, g.Shape = m.Kind, m.Device, m.DType, m.Shape
			}
			groups = append(groups, g)
		}
		// One pass: each slot's frees are read before its allocs, so that
		// no figure read here is negative.
		for i := range maxSiteMetas {
			c := s.metas.at(i)
			if c == nil {
				break
			}
			k := c.key.Load()
			if k == nil {
				break // claimed in order
			}
			moved, frees := c.moved.Load(), c.frees.Load()
			allocs := c.allocs.Load()
			st.AllocCount += allocs
			st.AllocBytes += allocs * k.bytes
			if n := allocs - frees - moved; n > 0 {
				count(k.meta, false, n, n*k.bytes)
			}
		}
		o := &s.metas.other
		moved, movedBytes, frees, freed := o.moved.Load(), o.movedBytes.Load(), o.frees.Load(), o.freedBytes.Load()
		allocs, allocBytes := o.allocs.Load(), o.allocBytes.Load()
		st.AllocCount += allocs
		st.AllocBytes += allocBytes
		if n := allocs - frees - moved; n > 0 {
			count(nil, true, n, allocBytes-freed-movedBytes)
		}
		if st.AllocCount == 0 {
			continue
		}
		index[s.id] = int32(len(stats))
		if len(groups)-first > 1 {
			sortGroups(groups[first:])
		}
		stats = append(stats, st)
	}
	if special := t.specialGroups(); len(special) > 0 {
		for _, g := range special {
			if g.Site.id < len(index) && index[g.Site.id] >= 0 {
				st := &stats[index[g.Site.id]] // outlived figures are the site's counters already
				st.LiveCount += g.Count
				st.LiveBytes += g.Bytes
				if st.Oldest.IsZero() || g.Oldest.Before(st.Oldest) {
					st.Oldest = g.Oldest
				}
			}
		}
		groups = append(groups, special...)
		sortGroups(groups) // else in order already: by site, then bytes
	}
	sortSites(stats)
	snap.Groups, snap.Sites = groups, stats
	return snap
}

// specialGroups returns the groups of the shards' special records.
func (t *Tracker) specialGroups() []Group {
	var groups *grouper
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for r := range sh.special {
			if groups == nil {
				groups = newGrouper(Filter{LabelKeys: []string{}})
			}
			m := metaOf(r)
			leaked := r.leaked()
			var held *Holder
			if h, ok := r.heldBy(); ok {
				held = &h
			}
			var nLeaked int64
			if leaked {
				nLeaked = 1
			}
			groups.addN(r.site, m.Kind, m.Device, m.DType, m.Shape, Labels{}, held, 1, r.Bytes, nLeaked,
				r.outlived(), r.time())
		}
		sh.mu.Unlock()
	}
	if groups == nil {
		return nil
	}
	return groups.finish(map[*Site]*SiteStats{})
}
