package track

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tensorlife/tensorlife/internal/counter"
	"github.com/tensorlife/tensorlife/internal/grouping"
)

// Allocation is a copy of one live record, as a snapshot holds it.
type Allocation struct {
	ID       uint64
	Bytes    int64
	Kind     string
	Device   string
	DType    string
	Shape    []int
	Labels   Labels
	Time     time.Time // when it was recorded
	Site     *Site
	Leaked   bool     // the collector found a handle of it dropped without Free
	Outlived bool     // it outlived its request (WithRequest)
	InFlight bool     // its request is open and holds it: neither ended nor handed on
	Owner    *Owner   // what it was handed to (HandOver); nil if none
	Holders  []Holder // the handles that keep it, by the line that made them
	req      *request // for Filter.Request in Snapshot.Select
}

// allocation copies r, its labels, flags and holders read now.
func (r *Record) allocation() Allocation {
	leaked := r.leaked()
	return r.allocationOf(metaOf(r), r.Labels(), leaked, r.holderList(leaked))
}

// allocationOf copies r with the figures the caller already read of it, so
// that each is read once and they agree with what the caller filtered on.
func (r *Record) allocationOf(m *Meta, labels Labels, leaked bool, holders []Holder) Allocation {
	return Allocation{
		ID: r.id, Bytes: r.Bytes, Kind: m.Kind, Device: m.Device, DType: m.DType,
		Shape: m.Shape, Labels: labels, Time: r.time(), Site: r.site, Leaked: leaked,
		Outlived: r.outlived(), InFlight: r.inFlight(), Owner: r.ownerOf(), req: r.req, Holders: holders,
	}
}

// MadeUnder reports whether a was made under ctx's request or one within it.
func (a *Allocation) MadeUnder(ctx context.Context) bool {
	req := scopeOf(ctx).req
	return req != nil && a.req.within(req)
}

// SiteStats are one site's figures: live ones as a snapshot saw them.
type SiteStats struct {
	Site          *Site
	LiveCount     int64
	LiveBytes     int64
	AllocCount    int64     // since the tracker started
	AllocBytes    int64     // and their bytes
	GCLeaks       int64     // found by the collector without Free
	Oldest        time.Time // of the oldest live allocation; zero if none
	OutlivedCount int64     // of the live ones, those that outlived their request
	OutlivedBytes int64     // and their bytes
	// OutlivedHandles are the handles taken at this line under a request
	// (a Retain, a cache hit: Record.HoldUnder) and still held after the
	// request ended; OutlivedHandleBytes the bytes of the records they
	// hold, which other handles may hold too.
	OutlivedHandles     int64
	OutlivedHandleBytes int64
}

// Group is the live allocations alike in every field: one profile sample.
type Group struct {
	Site     *Site
	Kind     string
	Device   string
	DType    string
	Shape    []int
	Labels   Labels
	Count    int64
	Bytes    int64
	Oldest   time.Time
	Leaked   int64 // how many of Count the collector found without Free
	Outlived bool  // these outlived their request
	// OtherShapes marks, in a snapshot read from counters, the one group
	// (Kind, Device, DType and Shape empty) of a site's tensors past the 64
	// shapes it counts apart, so that a profile's groups stay bounded.
	OtherShapes bool
	HeldBy      *Holder // the extra owner holding them once their own handle is gone
}

// Snapshot is an immutable copy of the live set, per site and group.
type Snapshot struct {
	Tracker     *Tracker // what it was taken of
	TrackerName string
	Time        time.Time
	Totals      Totals // unfiltered
	Filter      Filter
	// Sites lists every site that has allocated, most live bytes first;
	// live figures count what the filter selects, cumulative ones all.
	Sites       []SiteStats
	Groups      []Group      // by site id, then most bytes first; nil from GroupsOf
	Allocations []Allocation // by id, with Filter.Allocations
}

// Filter selects what a snapshot holds; the zero Filter, all, listing none.
type Filter struct {
	MinAge      time.Duration     // at least this old
	Outlived    bool              // outlived their request: what a watcher judges
	InFlight    bool              // held in flight by their open request (OpenRequests): never judged
	Request     context.Context   // made under this context's request, wherever kept since
	Kind        string            // of this kind; empty for all
	Device      string            // on this device ("cuda:1"); empty for all
	LeakedOnly  bool              // found by the collector without Free
	Labels      map[string]string // carrying all these labels
	Allocations bool              // list each match in Snapshot.Allocations
	// LabelKeys, when not nil, are the only label keys groups carry, so
	// memory is bounded whatever the labels hold. Empty, with no other field
	// set, the snapshot is read from counters, O(sites × shapes).
	LabelKeys []string
	Oldest    bool // fill Oldest even so: a walk
}

// Active reports whether f selects only some allocations.
func (f Filter) Active() bool {
	return f.MinAge != 0 || f.Outlived || f.InFlight || f.Request != nil || f.Kind != "" || f.Device != "" || f.LeakedOnly ||
		len(f.Labels) > 0
}

// Validate reports a filter that cannot be applied.
func (f Filter) Validate() error {
	if f.MinAge < 0 {
		return fmt.Errorf("%w: negative MinAge %v", ErrInvalidOption, f.MinAge)
	}
	if f.Outlived && f.InFlight {
		return fmt.Errorf("%w: Filter.Outlived and InFlight: a tensor is one or the other", ErrInvalidOption)
	}
	if f.Request != nil && scopeOf(f.Request).req == nil {
		return fmt.Errorf("%w: Filter.Request: the context is under no request", ErrInvalidOption)
	}
	return nil
}

// candidate is what a filter tests of one allocation.
type candidate struct {
	kind, device     string
	leaked, outlived bool
	inFlight         bool
	req              *request
	age              time.Duration
	labels           Labels
}

// admits reports whether c passes f: the one test behind SnapshotOf (on
// records) and Snapshot.Select (on allocations). req is f.Request's
// request, read once by the caller.
func (f Filter) admits(c candidate, req *request) bool {
	if (f.Kind != "" && c.kind != f.Kind) || (f.Device != "" && c.device != f.Device) ||
		(f.LeakedOnly && !c.leaked) || c.age < f.MinAge || (f.Outlived && !c.outlived) || (f.InFlight && !c.inFlight) ||
		(req != nil && !c.req.within(req)) {
		return false
	}
	labels := c.labels
	for k, v := range f.Labels {
		if got, ok := labels.Get(k); !ok || got != v {
			return false
		}
	}
	return true
}

// groupKey identifies a Group without allocating per record: shapes of up to
// eight dimensions are compared inline, longer ones by their rendering, and
// labels by the hash of their content (equal labels from separate
// WithLabels calls group together; a hash collision is told apart by
// collide, see SnapshotOf).
// grouper aggregates allocations into Groups, for SnapshotOf (from records)
// and Snapshot.Select (from allocations) alike. With byKeys, groups are
// told apart by the label keys in keys alone and carry only those: what a
// profile that shows no other label needs, in memory bounded by the groups
// whatever the labels hold.
//
// While it reads, a group is a compact entry (72 bytes: the record's Meta
// by pointer, the oldest time as an offset, the low half of its hash),
// kept in an internal/grouping table (chunks that never move, found
// through an open-addressed index by the hash of what tells them apart);
// finish sorts them (grouping.Table.Sorted) and writes each Group once, in
// order, or Books.GroupsOf keeps the entries and makes each Group as it
// is read.
// A snapshot of 200k groups (a label per request) costs its Groups, their
// entries and a table of 4-byte slots: not a map of keys, a chain, and
// the Groups twice (as chunks, then copied whole).
type grouper struct {
	groups  grouping.Table[groupEntry, sortClass, *groupEntry]
	keys    []string
	byKeys  bool
	base    time.Time // the oldest times are offsets from it
	hasBase bool
	// lastMeta and lastMetaHash are the Meta last hashed and its hash:
	// records of a site mostly share one, so its strings are hashed once
	// a run, not once a record.
	lastMeta     *Meta
	lastMetaHash uint64
}

// groupEntry is a group while the grouper reads.
type groupEntry struct {
	site                 *Site
	meta                 *Meta // kind, device, dtype and shape
	labels               Labels
	held                 *Holder
	count, bytes, leaked int64
	oldest               int64 // nanoseconds after grouper.base; noTime for the zero time
	outlived, other      bool
	hash                 uint32 // the low half of the hash of its identity, in what would be padding
}

// noTime is the oldest offset of a group whose oldest time is zero.
const noTime = math.MinInt64

func newGrouper(f Filter) *grouper {
	return &grouper{keys: f.LabelKeys, byKeys: f.LabelKeys != nil}
}

func (gr *grouper) at(i int32) *groupEntry { return gr.groups.At(i) }

// groupOf is a group's identity: what tells two groups apart. meta, when
// set, is an interned Meta holding kind, device, dtype and shape, kept by
// pointer; without it a new group copies them into a Meta of its own.
type groupOf struct {
	site                *Site
	meta                *Meta
	kind, device, dtype string
	shape               []int
	labels              Labels
	held                *Holder
	outlived, other     bool
}

func (gr *grouper) hash(k *groupOf) uint64 {
	// Strings through maphash.String, the rest mixed in as integers: no
	// step of it allocates, at one hash per record walked.
	h := grouping.Mix(0, uint64(k.site.id))
	h = grouping.Mix(h, gr.metaHash(k))
	h = grouping.Mix(h, gr.labelHash(k.labels))
	if k.held != nil {
		h = grouping.Mix(h, uint64(siteID(k.held.Site))+1)
		h = grouping.Mix(h, maphash.String(labelSeed, k.held.How))
	}
	if k.outlived {
		h = grouping.Mix(h, 1)
	}
	if k.other {
		h = grouping.Mix(h, 2)
	}
	return h
}

// metaHash returns the hash of k's kind, device, dtype and shape, from
// the last one's when k has its Meta.
func (gr *grouper) metaHash(k *groupOf) uint64 {
	if k.meta != nil && k.meta == gr.lastMeta {
		return gr.lastMetaHash
	}
	h := maphash.String(labelSeed, k.kind)
	h = grouping.Mix(h, maphash.String(labelSeed, k.device))
	h = grouping.Mix(h, maphash.String(labelSeed, k.dtype))
	h = grouping.Mix(h, uint64(len(k.shape)))
	for _, d := range k.shape {
		h = grouping.Mix(h, uint64(d))
	}
	if k.meta != nil {
		gr.lastMeta, gr.lastMetaHash = k.meta, h
	}
	return h
}

func (gr *grouper) matches(e *groupEntry, k *groupOf) bool {
	if e.site != k.site || e.outlived != k.outlived || e.other != k.other {
		return false
	}
	if m := e.meta; m != k.meta && (m.Kind != k.kind || m.Device != k.device || m.DType != k.dtype ||
		!slices.Equal(m.Shape, k.shape)) {
		return false
	}
	if (e.held == nil) != (k.held == nil) ||
		e.held != nil && (e.held.Site != k.held.Site || e.held.How != k.held.How) {
		return false
	}
	return gr.sameLabels(e.labels, k.labels)
}

// group returns the entry of k, made empty if it has none yet.
func (gr *grouper) group(k *groupOf) *groupEntry {
	h := uint32(gr.hash(k)) // a table never has 2³² slots
	e, added := gr.groups.Find(h, func(e *groupEntry) bool { return gr.matches(e, k) })
	if !added {
		return e
	}
	m := k.meta
	if m == nil {
		m = &Meta{Kind: k.kind, Device: k.device, DType: k.dtype, Shape: k.shape}
	}
	*e = groupEntry{site: k.site, meta: m, labels: gr.groupLabels(k.labels), outlived: k.outlived, other: k.other,
		hash: h}
	if k.held != nil {
		e.held = &Holder{Site: k.held.Site, How: k.held.How}
	}
	return e
}

// labelHash returns the hash groups of labels are keyed by.
func (gr *grouper) labelHash(l Labels) uint64 {
	if !gr.byKeys {
		return l.hash()
	}
	if len(gr.keys) == 0 || l.Len() == 0 {
		return 0
	}
	// The hash of the pairs of l whose keys are the grouper's, as
	// hashLabels would hash them: where every key of l is one, the hash l
	// keeps, and no value is hashed again.
	kv := l.set.kv
	kept := 0
	for i := 0; i < len(kv); i += 2 {
		if slices.Contains(gr.keys, kv[i]) {
			kept++
		}
	}
	switch kept {
	case 0:
		return 0
	case len(kv) / 2:
		return l.set.hash()
	}
	var h maphash.Hash
	h.SetSeed(labelSeed)
	for i := 0; i < len(kv); i += 2 {
		if slices.Contains(gr.keys, kv[i]) {
			h.WriteString(kv[i])
			h.WriteByte(0)
			h.WriteString(kv[i+1])
			h.WriteByte(0)
		}
	}
	return h.Sum64() | 1 // as labelSet.hash marks its own
}

// sameLabels reports whether a group's labels are l's, as groups see them.
func (gr *grouper) sameLabels(g Labels, l Labels) bool {
	if !gr.byKeys {
		return g.Equal(l)
	}
	for _, k := range gr.keys {
		gv, gok := g.Get(k)
		lv, lok := l.Get(k)
		if gok != lok || gv != lv {
			return false
		}
	}
	return true
}

// groupLabels returns the labels a new group of l carries.
func (gr *grouper) groupLabels(l Labels) Labels {
	if !gr.byKeys {
		return l
	}
	var buf [2 * maxLabelKeys]string // l holds no more: kv stays off the heap
	kv := buf[:0]
	for _, k := range gr.keys {
		if v, ok := l.Get(k); ok {
			kv = append(kv, k, v)
		}
	}
	if len(kv) == 0 {
		return Labels{}
	}
	if len(kv) == 2*l.Len() {
		return l // every label of l is a key: it is its own group's labels
	}
	return NewLabels(kv...)
}

// add counts one allocation of m's kind, device, dtype and shape. held is
// the extra owner holding it once its own handle is gone; nil while the
// own handle holds it.
func (gr *grouper) add(site *Site, m *Meta, labels Labels, held *Holder,
	bytes int64, leaked, outlived bool, born time.Time) {
	var n int64
	if leaked {
		n = 1
	}
	gr.addN(site, m, labels, held, 1, bytes, n, outlived, born)
}

// addN counts count allocations of bytes in all, leaked of them found by
// the collector, as add counts one.
func (gr *grouper) addN(site *Site, m *Meta, labels Labels, held *Holder,
	count, bytes, leaked int64, outlived bool, born time.Time) {
	k := groupOf{site: site, meta: m, kind: m.Kind, device: m.Device, dtype: m.DType, shape: m.Shape,
		labels: labels, held: held, outlived: outlived}
	gr.count(gr.group(&k), count, bytes, leaked, born)
}

// addOf counts one allocation as add does, of a kind, device, dtype and
// shape held by no interned Meta (an Allocation's).
func (gr *grouper) addOf(site *Site, kind, device, dtype string, shape []int, labels Labels, held *Holder,
	bytes int64, leaked, outlived bool, born time.Time) {
	k := groupOf{site: site, kind: kind, device: device, dtype: dtype, shape: shape, labels: labels, held: held,
		outlived: outlived}
	var n int64
	if leaked {
		n = 1
	}
	gr.count(gr.group(&k), 1, bytes, n, born)
}

// count adds count allocations born at born to e.
func (gr *grouper) count(e *groupEntry, count, bytes, leaked int64, born time.Time) {
	at := int64(noTime) // the zero time, before every other
	if !born.IsZero() {
		if !gr.hasBase {
			gr.base, gr.hasBase = born, true
		}
		at = int64(born.Sub(gr.base))
	}
	if e.count == 0 || at < e.oldest {
		e.oldest = at
	}
	e.count += count
	e.bytes = counter.AddSat(e.bytes, bytes) // records near MaxInt64 bytes saturate the group
	e.leaked += leaked
}

// finish returns the groups in order and adds their live figures to their
// sites in bySite, making the entries it lacks.
func (gr *grouper) finish(bySite map[*Site]*SiteStats) []Group {
	order := gr.sorted()
	out := make([]Group, len(order))
	for i, k := range order {
		out[i] = gr.groupAt(k.At)
	}
	gr.groups.Release()
	for i := range out {
		addToSite(bySite, &out[i])
	}
	return out
}

// groupAt returns the Group of entry i.
func (gr *grouper) groupAt(i int32) Group {
	e := gr.at(i)
	var oldest time.Time
	if e.oldest != noTime {
		oldest = gr.base.Add(time.Duration(e.oldest))
	}
	return Group{Site: e.site, Kind: e.meta.Kind, Device: e.meta.Device, DType: e.meta.DType,
		Shape: e.meta.Shape, Labels: e.labels, Count: e.count, Bytes: e.bytes, Oldest: oldest,
		Leaked: e.leaked, Outlived: e.outlived, HeldBy: e.held, OtherShapes: e.other}
}

// addToSite adds g's live figures to its site's in bySite, making the
// entry when it lacks one.
func addToSite(bySite map[*Site]*SiteStats, g *Group) {
	st := bySite[g.Site]
	if st == nil {
		st = &SiteStats{Site: g.Site}
		bySite[g.Site] = st
	}
	st.add(g)
}

// sorted returns the entries' positions in the order of groups
// (entryOrder); grouping.Table.Sorted says how. Where groups are told
// apart by one label key, its values break the ties of entries alike in
// all else.
func (gr *grouper) sorted() []grouping.Key {
	return gr.groups.Sorted(gr.byKeys && len(gr.keys) == 1)
}

// sortClass is what entries alike up to their labels share: all that
// entryOrder compares before the labels.
type sortClass struct {
	site  *Site
	meta  *Meta
	bytes int64
	other bool
}

// Compare orders classes as entryOrder orders their entries; classes of
// equal content by different Metas compare equal.
func (a sortClass) Compare(b sortClass) int {
	return cmp.Or(cmp.Compare(a.site.id, b.site.id), cmp.Compare(b.bytes, a.bytes),
		compareBool(a.other, b.other), strings.Compare(a.meta.Kind, b.meta.Kind),
		strings.Compare(a.meta.DType, b.meta.DType), strings.Compare(a.meta.Device, b.meta.Device),
		slices.Compare(a.meta.Shape, b.meta.Shape))
}

// Hash returns the low half of the hash of e's identity.
func (e *groupEntry) Hash() uint32 { return e.hash }

// Class returns what e shares with the entries alike up to their labels.
func (e *groupEntry) Class() sortClass {
	return sortClass{site: e.site, meta: e.meta, bytes: e.bytes, other: e.other}
}

// Tie returns the value of e's one label, false if it has none or more.
func (e *groupEntry) Tie() (string, bool) {
	l := e.labels
	if l.set == nil || len(l.set.kv) != 2 {
		return "", false
	}
	return l.set.kv[1], true
}

// Compare orders e and o as their groups are ordered (entryOrder).
func (e *groupEntry) Compare(o *groupEntry) int { return entryOrder(e, o) }

// entryOrder is the order of groups (sortGroups) on their entries.
func entryOrder(a, b *groupEntry) int {
	if c := cmp.Or(cmp.Compare(a.site.id, b.site.id), cmp.Compare(b.bytes, a.bytes)); c != 0 {
		return c
	}
	return cmp.Or(compareBool(a.other, b.other), strings.Compare(a.meta.Kind, b.meta.Kind),
		strings.Compare(a.meta.DType, b.meta.DType), strings.Compare(a.meta.Device, b.meta.Device),
		slices.Compare(a.meta.Shape, b.meta.Shape), compareLabels(a.labels, b.labels),
		compareHolders(a.held, b.held), compareBool(a.outlived, b.outlived))
}

// SiteSnapshot is a snapshot of the counters alone: O(sites), no walk.
func (t *Tracker) SiteSnapshot() *Snapshot {
	return &Snapshot{Tracker: t, TrackerName: t.cfg.name, Time: t.Now(), Totals: t.Totals(), Sites: t.SiteTotals()}
}

// Snapshot copies the whole live set, every allocation listed.
func (t *Tracker) Snapshot() *Snapshot {
	s, _ := t.SnapshotOf(Filter{Allocations: true}) // this filter is valid
	return s
}

// SnapshotOf copies the live allocations f selects.
func (t *Tracker) SnapshotOf(f Filter) (*Snapshot, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if f.counted() {
		t.sweep()
		return t.counts().snapshot(f), nil
	}
	now, groups, allocs := t.walk(f)
	return t.finishSnapshot(f, now, groups, allocs), nil
}

// walk reads the live allocations the valid filter f selects, at now: into
// groups, and listed with Filter.Allocations.
func (t *Tracker) walk(f Filter) (now time.Time, groups *grouper, allocs []Allocation) {
	now = t.Now()
	groups = newGrouper(f)
	sinceStart := int64(now.Sub(t.start))
	wantReq := scopeOf(f.Request).req
	var heldBuf Holder
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for r := sh.head; r != nil; r = r.next {
			m := metaOf(r)
			labels := r.Labels() // read once: SetLabels may replace them
			leaked, outlived := r.leaked(), r.outlivedNow()
			c := candidate{kind: m.Kind, device: m.Device, leaked: leaked, outlived: outlived, inFlight: r.inFlight(), req: r.req,
				age: time.Duration(sinceStart - r.born), labels: labels}
			if !f.admits(c, wantReq) {
				continue
			}
			var holders []Holder
			var held *Holder // into heldBuf: the grouper copies what it keeps
			if f.Allocations {
				// Listed holders and the group's holder come from one read.
				holders = r.holderList(leaked)
				if h, ok := heldByOf(holders); ok {
					heldBuf, held = h, &heldBuf
				}
			} else if h, ok := r.heldBy(); ok {
				heldBuf, held = h, &heldBuf
			}
			groups.add(r.site, m, labels, held, r.Bytes, leaked, outlived, r.time())
			if f.Allocations {
				allocs = append(allocs, r.allocationOf(m, labels, leaked, holders))
			}
		}
		sh.mu.Unlock()
	}
	return now, groups, allocs
}

// finishSnapshot puts a snapshot together from its groups and allocations.
func (t *Tracker) finishSnapshot(f Filter, now time.Time, groups *grouper, allocs []Allocation) *Snapshot {
	snap, bySite := t.startSnapshot(f, now, allocs)
	snap.Groups = groups.finish(bySite)
	t.endSnapshot(snap, bySite)
	return snap
}

// startSnapshot begins the snapshot of f at now, and the figures of its
// sites by site, for its groups to add their live figures to: every site
// that ever allocated is listed, filtered or not, so that two snapshots
// always have the same cumulative figures to subtract; with a filter, a
// site's live figures count only its matches.
func (t *Tracker) startSnapshot(f Filter, now time.Time, allocs []Allocation) (*Snapshot, map[*Site]*SiteStats) {
	snap := &Snapshot{Tracker: t, TrackerName: t.cfg.name, Time: now, Totals: t.Totals(), Filter: f, Allocations: allocs}
	slices.SortFunc(snap.Allocations, func(a, b Allocation) int { return cmp.Compare(a.ID, b.ID) })

	bySite := make(map[*Site]*SiteStats)
	for _, s := range t.stacks.sites() {
		if s.metas.allocated() > 0 {
			bySite[s] = &SiteStats{Site: s}
		}
	}
	return snap, bySite
}

// endSnapshot lists the sites of snap from bySite, their live figures
// added by its groups.
func (t *Tracker) endSnapshot(snap *Snapshot, bySite map[*Site]*SiteStats) {
	snap.Sites = make([]SiteStats, 0, len(bySite))
	for s, st := range bySite {
		var allocBytes counter.Sum
		st.AllocCount, _, allocBytes, _ = s.metas.figures()
		st.AllocBytes = allocBytes.Load()
		st.GCLeaks = s.gcLeaks.Load()
		snap.Sites = append(snap.Sites, *st)
	}
	sortSites(snap.Sites)
}

// errNoAllocations is Snapshot.Select's error for a snapshot that does not
// list its allocations (Filter.Allocations).
var errNoAllocations = fmt.Errorf("%w: the snapshot does not list its allocations (Filter.Allocations)", ErrInvalidOption)

// Select filters s.Allocations by f, or fails with ErrInvalidOption.
func (s *Snapshot) Select(f Filter) (*Snapshot, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if !s.Filter.Allocations {
		return nil, errNoAllocations
	}
	merged := s.Filter
	merged.MinAge = max(merged.MinAge, f.MinAge)
	merged.Outlived = merged.Outlived || f.Outlived
	merged.InFlight = merged.InFlight || f.InFlight
	if f.Request != nil {
		merged.Request = f.Request
	}
	if f.LabelKeys != nil {
		merged.LabelKeys = f.LabelKeys
	}
	merged.LeakedOnly = merged.LeakedOnly || f.LeakedOnly
	if f.Kind != "" {
		merged.Kind = f.Kind
	}
	if f.Device != "" {
		merged.Device = f.Device
	}
	if len(f.Labels) > 0 {
		merged.Labels = make(map[string]string, len(s.Filter.Labels)+len(f.Labels))
		maps.Copy(merged.Labels, s.Filter.Labels)
		maps.Copy(merged.Labels, f.Labels)
	}
	out := &Snapshot{Tracker: s.Tracker, TrackerName: s.TrackerName, Time: s.Time, Totals: s.Totals, Filter: merged}
	groups := newGrouper(merged)
	wantReq := scopeOf(f.Request).req
	for _, a := range s.Allocations {
		c := candidate{kind: a.Kind, device: a.Device, leaked: a.Leaked, outlived: a.Outlived, inFlight: a.InFlight, req: a.req,
			age: s.Time.Sub(a.Time), labels: a.Labels}
		if !f.admits(c, wantReq) {
			continue
		}
		out.Allocations = append(out.Allocations, a)
		var held *Holder
		if h, ok := heldByOf(a.Holders); ok {
			held = &h
		}
		groups.addOf(a.Site, a.Kind, a.Device, a.DType, a.Shape, a.Labels, held, a.Bytes, a.Leaked, a.Outlived, a.Time)
	}
	live := make(map[*Site]*SiteStats)
	out.Groups = groups.finish(live)
	out.Sites = make([]SiteStats, 0, len(s.Sites))
	for _, st := range s.Sites {
		n := SiteStats{Site: st.Site, AllocCount: st.AllocCount, AllocBytes: st.AllocBytes, GCLeaks: st.GCLeaks}
		if l := live[st.Site]; l != nil {
			n.LiveCount, n.LiveBytes, n.Oldest = l.LiveCount, l.LiveBytes, l.Oldest
			n.OutlivedCount, n.OutlivedBytes = l.OutlivedCount, l.OutlivedBytes
		}
		out.Sites = append(out.Sites, n)
	}
	sortSites(out.Sites)
	return out, nil
}

// add counts g's live figures in st.
func (st *SiteStats) add(g *Group) {
	st.LiveCount += g.Count
	st.LiveBytes = counter.AddSat(st.LiveBytes, g.Bytes)
	if g.Outlived {
		st.OutlivedCount += g.Count
		st.OutlivedBytes = counter.AddSat(st.OutlivedBytes, g.Bytes)
	}
	if st.Oldest.IsZero() || g.Oldest.Before(st.Oldest) {
		st.Oldest = g.Oldest
	}
}

// sortGroups orders groups by site, then by bytes, largest first.
func sortGroups(groups []Group) {
	slices.SortFunc(groups, func(a, b Group) int {
		if c := cmp.Or(cmp.Compare(a.Site.id, b.Site.id), cmp.Compare(b.Bytes, a.Bytes)); c != 0 {
			return c
		}
		return groupOrder(a, b) // only on ties
	})
}

// groupOrder breaks ties between groups of one site deterministically,
// comparing in place: 200k groups of one site with equal bytes (a label per
// request) sort without formatting a shape or a label set.
func groupOrder(a, b Group) int {
	return cmp.Or(compareBool(a.OtherShapes, b.OtherShapes), strings.Compare(a.Kind, b.Kind), strings.Compare(a.DType, b.DType),
		strings.Compare(a.Device, b.Device), slices.Compare(a.Shape, b.Shape),
		compareLabels(a.Labels, b.Labels), compareHolders(a.HeldBy, b.HeldBy))
}

// compareLabels orders label sets by their sorted pairs.
func compareLabels(a, b Labels) int {
	if a.set == b.set {
		return 0
	}
	var ak, bk []string
	if a.set != nil {
		ak = a.set.kv
	}
	if b.set != nil {
		bk = b.set.kv
	}
	return slices.Compare(ak, bk)
}

// compareHolders orders the holders groups are held by, none first.
func compareHolders(a, b *Holder) int {
	switch {
	case a == nil || b == nil:
		return compareBool(a != nil, b != nil)
	}
	return cmp.Or(strings.Compare(a.How, b.How), cmp.Compare(siteID(a.Site), siteID(b.Site)), cmp.Compare(a.Live, b.Live))
}

// compareBool orders false first.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func sortSites(s []SiteStats) {
	slices.SortFunc(s, func(a, b SiteStats) int {
		return cmp.Or(cmp.Compare(b.LiveBytes, a.LiveBytes), cmp.Compare(b.AllocBytes, a.AllocBytes),
			cmp.Compare(a.Site.id, b.Site.id))
	})
}

// SiteTotals returns every site's figures from its counters: O(sites). Its
// outlived figures see a labelled context's end as Totals' do.
func (t *Tracker) SiteTotals() []SiteStats {
	t.sweep()
	sites := t.stacks.sites()
	out := make([]SiteStats, 0, len(sites))
	for _, s := range sites {
		if s.metas.allocated() == 0 {
			continue
		}
		out = append(out, s.Stats())
	}
	sortSites(out)
	return out
}

// TopSites returns up to n sites with live bytes, most first, from their
// counters: O(sites × n), allocating only what it returns. Its outlived
// figures see a labelled context's end as Totals' do.
func (t *Tracker) TopSites(n int) []SiteStats {
	if n <= 0 {
		return nil
	}
	t.sweep()
	var top []SiteStats
	for _, s := range t.stacks.sites() {
		st := s.Stats()
		if st.LiveBytes <= 0 {
			continue
		}
		if len(top) == n && !siteBefore(st, top[n-1]) {
			continue
		}
		if top == nil {
			top = make([]SiteStats, 0, n)
		}
		i := len(top)
		for i > 0 && siteBefore(st, top[i-1]) {
			i--
		}
		if len(top) < n {
			top = append(top, SiteStats{})
		}
		copy(top[i+1:], top[i:len(top)-1])
		top[i] = st
	}
	return top
}

// siteBefore reports whether a sorts before b in sortSites' order.
func siteBefore(a, b SiteStats) bool {
	return cmp.Or(cmp.Compare(b.LiveBytes, a.LiveBytes), cmp.Compare(b.AllocBytes, a.AllocBytes),
		cmp.Compare(a.Site.id, b.Site.id)) < 0
}

// Top returns up to n sites with live bytes, most first.
func (s *Snapshot) Top(n int) []SiteStats {
	if n <= 0 {
		return nil
	}
	out := make([]SiteStats, 0, min(n, len(s.Sites)))
	for _, st := range s.Sites {
		if len(out) == n {
			break
		}
		if st.LiveBytes > 0 || st.LiveCount > 0 {
			out = append(out, st)
		}
	}
	return out
}
