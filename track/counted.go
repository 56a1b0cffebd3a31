package track

import (
	"sync/atomic"
	"time"
)

// A snapshot for the default profile (no filter but the label keys it
// shows, and none of those) is read from counters kept on the record path,
// so a scrape costs O(sites × shapes), not O(live tensors): every site counts
// its live tensors by Meta, in up to maxSiteMetas slots claimed on first use.
// A record whose holders make it a group of its own (its own handle freed
// while a View or Retain holds it, or a handle the collector found dropped),
// or whose site has no slot left, is special: its shard keeps it in a set,
// and the snapshot walks that set alone.

const (
	inlineMetas  = 4    // the slots every site has
	maxSiteMetas = 64   // the slots a site may have
	noSlot       = 0x7f // all slot bits set: the record is special
	slotShift    = 8    // a record's slot in its word: bits 8..14
	slotMask     = 0x7f << slotShift
)

type metaCount struct {
	meta         atomic.Pointer[Meta]
	count, bytes atomic.Int64
}

// siteMetas are a site's live figures by Meta.
type siteMetas struct {
	inline [inlineMetas]metaCount
	more   atomic.Pointer[[maxSiteMetas - inlineMetas]metaCount]
}

// at returns slot i, making the slots past the inline ones on first use
// when grow is set; nil when they do not exist.
func (sm *siteMetas) at(i int, grow bool) *metaCount {
	if i < inlineMetas {
		return &sm.inline[i]
	}
	more := sm.more.Load()
	if more == nil {
		if !grow {
			return nil
		}
		sm.more.CompareAndSwap(nil, new([maxSiteMetas - inlineMetas]metaCount))
		more = sm.more.Load()
	}
	return &more[i-inlineMetas]
}

// slot returns the index of m's slot, claiming a free one; noSlot when
// every slot holds another Meta. Lock-free: a slot, once claimed, keeps
// its Meta.
func (sm *siteMetas) slot(m *Meta) int {
	for i := range maxSiteMetas {
		c := sm.at(i, true)
		p := c.meta.Load()
		if p == nil && c.meta.CompareAndSwap(nil, m) {
			return i
		}
		if p == m || c.meta.Load() == m {
			return i
		}
	}
	return noSlot
}

// add counts a record of bytes in slot i (negative to take it back).
func (sm *siteMetas) add(i int, count, bytes int64) {
	c := sm.at(i, false)
	c.count.Add(count)
	c.bytes.Add(bytes)
}

func (r *Record) slot() int { return int(r.word.Load()&slotMask) >> slotShift }

// count adds r to its site's slot, or to its shard's special records.
// Called at Record with the shard's lock held.
func (sh *shardData) count(r *Record, m *Meta) {
	i := r.site.metas.slot(m)
	r.word.Or(uint32(i) << slotShift)
	if i == noSlot {
		sh.addSpecial(r)
		return
	}
	r.site.metas.add(i, 1, r.Bytes)
}

// uncount undoes count, at Release, with the shard's lock held.
func (sh *shardData) uncount(r *Record) {
	if i := r.slot(); i != noSlot {
		r.site.metas.add(i, -1, -r.Bytes)
		return
	}
	delete(sh.special, r)
}

func (sh *shardData) addSpecial(r *Record) {
	if sh.special == nil {
		sh.special = make(map[*Record]struct{})
	}
	sh.special[r] = struct{}{}
}

// makeSpecial moves the live record r from its site's slot to its shard's
// special records: its holders or leaked flag now set it apart.
func (t *Tracker) makeSpecial(r *Record) {
	if r.slot() == noSlot {
		return
	}
	sh := &t.shards[r.id%shardCount]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := r.slot()
	if i == noSlot || r.state() != stateLive {
		return
	}
	r.site.metas.add(i, -1, -r.Bytes)
	r.word.Or(slotMask)
	sh.addSpecial(r)
}

// counted reports whether a snapshot of f can be read from counters: the
// default profile's, with no filter and grouped by no label.
func (f Filter) counted() bool {
	return f.MinAge == 0 && !f.Outlived && f.Request == nil && f.Kind == "" && f.Device == "" &&
		!f.LeakedOnly && len(f.Labels) == 0 && !f.Allocations && !f.Oldest && f.LabelKeys != nil &&
		len(f.LabelKeys) == 0
}

// countedGroups fills groups from the sites' slots and the shards'
// special records: O(sites × shapes + special records). The slots are
// read without locks, each exact, not all at one instant; their groups
// have no Oldest.
func (t *Tracker) countedGroups(groups *grouper, sites []*Site) {
	for _, s := range sites {
		for i := range maxSiteMetas {
			c := s.metas.at(i, false)
			if c == nil {
				break
			}
			m := c.meta.Load()
			if m == nil {
				break
			}
			if n, b := c.count.Load(), c.bytes.Load(); n > 0 {
				groups.addN(s, m.Kind, m.Device, m.DType, m.Shape, Labels{}, nil, n, b, 0, false, time.Time{})
			}
		}
	}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for r := range sh.special {
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
}
