package track

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tensorlife/tensorlife/internal/counter"
)

// Errors of the registry.
var (
	// ErrMisuse: a record passed wrongly (nil, twice, never recorded, of
	// another tracker); the message says how; Totals.Misuse counts it.
	ErrMisuse        = errors.New("track: record misused")
	ErrNilTracker    = errors.New("track: nil tracker")
	ErrInvalidOption = errors.New("track: invalid option") // an option or filter that cannot be used
)

// Misuses of a record, each wrapping ErrMisuse.
var (
	errNilRecord       = fmt.Errorf("%w: nil record", ErrMisuse)
	errAlreadyRecorded = fmt.Errorf("%w: record already recorded", ErrMisuse)
	errNotRecorded     = fmt.Errorf("%w: record was never recorded", ErrMisuse)
	errNilOwner        = fmt.Errorf("%w: nil owner", ErrMisuse)
)

// errNotHanded is the misuse of handing back r, which no owner holds.
func errNotHanded(r *Record) error {
	return fmt.Errorf("%w: record %d from %s handed back but not handed over", ErrMisuse, r.id, r.site)
}

// errReleased is the misuse of r, verb after its release.
func errReleased(r *Record, verb string) error {
	return fmt.Errorf("%w: record %d from %s %s after its release", ErrMisuse, r.id, r.site, verb)
}

// shardCount is the number of registry shards; a record's shard is its id
// modulo shardCount. The cost is 64 cache lines per tracker.
//
// While records are made one at a time, ids come from one counter, so
// consecutive records land on consecutive shards, and the live bytes are
// also kept in one tracker-wide total, from which the peak is exact. Both
// are cache lines that every goroutine writes, which makes the record path
// slower per operation the more goroutines record at once. So the first
// time a goroutine finds that total changed under it (its compare-and-swap
// fails: goroutines contend), the tracker spreads, for its life: each
// goroutine records in the shard of its P (a hint drawn once per P and
// cached in a sync.Pool: recordHint), takes ids from its shard's batch of
// idBatch, drawn from the counter once per batch, and counts live bytes
// and their peak in its shard alone, under the lock it takes anyway.
// Live figures stay exact (they are the shards' sums); the peak becomes
// the highest of the total's (which still counts the records made before),
// each shard's, and every total a reader has summed: never above the true
// peak, and equal to it until goroutines contend.
const shardCount = 64

// idBatch is how many ids a spread shard takes from the counter at once
// (ids idBatch*shardCount apart, a shard's being those equal to its index
// modulo shardCount): one write of the shared counter per idBatch records.
const idBatch = 1024

// recordHint hands each P a number, drawn in turn when the P first asks:
// goroutines running at once on different Ps draw different shards. It is
// a hint only (a goroutine may move, the collector empties the pool), so
// two Ps share a shard for a while at worst. Process-wide, as the Ps are.
var (
	nextHint    atomic.Uint32
	recordHints = sync.Pool{New: func() any {
		h := nextHint.Add(1) - 1
		return &h
	}}
)

func recordHint() uint32 {
	h := recordHints.Get().(*uint32)
	n := *h
	recordHints.Put(h)
	return n
}

// shard is one part of the live registry: an intrusive doubly linked list of
// records under a mutex. Insert and remove are O(1) and allocate nothing,
// which a map would not promise; snapshots walk the lists.
//
// The shard's counters are plain integers guarded by its mutex: updating
// them costs nothing beyond the lock the list already needs. Only the live
// byte total that the peak is computed from is a tracker-wide atomic.
type shard struct {
	shardData
	_ [counter.CacheLine - unsafe.Sizeof(shardData{})%counter.CacheLine]byte // no false sharing
}

// liveCount is a shard's live figures of one class, its bytes exact.
type liveCount struct {
	count int64
	bytes counter.Sum
}

type shardData struct {
	mu         sync.Mutex
	head       *Record
	allocs     int64
	frees      int64
	allocBytes counter.Sum // exact, past MaxInt64 too, as liveBytes
	liveBytes  counter.Sum
	peakBytes  int64  // the highest liveBytes, held at MaxInt64
	nextID     uint64 // a spread shard's next id; ids left in its batch:
	idsLeft    int
	special    map[*Record]struct{}  // records counted apart from their site's slots (counted.go)
	classRefs  []classRef            // the class ids this shard has looked up
	classes    [maxClasses]liveCount // live figures by class id
	history    ring                  // empty unless the KeepHistory option is set
}

// Live figures by device and kind (a class) are what metrics break the
// live set down by. Kinds are low-cardinality by contract; a tracker gives
// ids to at most maxClasses-1 classes, and counts every class after under
// otherKind, so that a kind per request cannot grow the metrics without
// bound. The ids are the tracker's, so every shard agrees on them; each
// shard counts by id, and looks ids up through a small cache of its own.

// maxClasses bounds a tracker's classes, the otherKind class included.
const maxClasses = 64

// otherKind is the kind under which the live figures of classes past the
// bound are counted (Books.LiveByClass): kinds are meant to be few.
const otherKind = "tensorlife.other"

// otherClass is the id of the otherKind class.
const otherClass = maxClasses - 1

type classKey struct{ device, kind string }

// classRegistry gives a tracker's classes their ids. A shard asks it once
// per class it has not seen, under a mutex: that is rare.
type classRegistry struct {
	mu    sync.Mutex
	ids   map[classKey]uint16
	names []classKey // by id, below otherClass
}

func (c *classRegistry) id(k classKey) uint16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.ids[k]; ok {
		return id
	}
	if len(c.names) == otherClass {
		return otherClass
	}
	if c.ids == nil {
		c.ids = make(map[classKey]uint16)
	}
	id := uint16(len(c.names))
	c.ids[k] = id
	c.names = append(c.names, k)
	return id
}

// name returns the device and kind of class id.
func (c *classRegistry) name(id int) classKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id >= len(c.names) {
		return classKey{kind: otherKind}
	}
	return c.names[id]
}

// classRef is a shard's cached id of one class.
type classRef struct {
	classKey
	id uint16
}

// class returns the id of the class of device and kind, through the
// shard's cache (at most maxClasses entries; a shard that sees more asks
// the registry each time). Called with the shard's lock held. String
// comparison stops at the pointer when both strings share their bytes, as
// constant kinds do.
func (sh *shardData) class(reg *classRegistry, device, kind string) uint16 {
	for i := range sh.classRefs {
		if c := &sh.classRefs[i]; c.kind == kind && c.device == device {
			return c.id
		}
	}
	k := classKey{device, kind}
	id := reg.id(k)
	if len(sh.classRefs) < maxClasses {
		sh.classRefs = append(sh.classRefs, classRef{k, id})
	}
	return id
}

// Record is one allocation in the registry, which an allocator embeds in
// what it hands out, fills and passes to Books.Record. Packed to keep a
// live tensor within 256 B, it never points back at what it tracks.
type Record struct {
	Bytes   int64 // device bytes the allocation holds
	Meta    *Meta // its kind, device, dtype and shape (InternMeta); nil for none
	tracker *Tracker
	site    *Site
	labels  atomic.Pointer[labelSet]  // a Labels; atomic so that SetLabels races no reader
	holders atomic.Pointer[holderSet] // extra owners; nil while only the own handle holds it
	id      uint64
	born    int64 // nanoseconds since the tracker started, monotonic
	// word packs the record's state, flags, slot at its site and class
	// (recordword.go).
	word       atomic.Uint32
	prev, next *Record  // the shard's list
	req        *request // the request it was made under; nil if none
}

// ID returns r's id, unique in its tracker; 0 before Record.
func (r *Record) ID() uint64 { return r.id }

// Site returns the call site that made the allocation.
func (r *Record) Site() *Site { return r.site }

// Labels returns r's labels.
func (r *Record) Labels() Labels { return Labels{set: r.labels.Load()} }

// Tracker returns the tracker that recorded r, or nil.
func (r *Record) Tracker() *Tracker { return r.tracker }

// Tracker is the live registry of allocations. Safe for concurrent use.
type Tracker struct {
	trackerHead
	// The read-mostly head apart from shard 0, and the shards on cache
	// line boundaries (the tracker is allocated aligned): a shard that
	// straddled two lines would cost every record a second line.
	_      [counter.CacheLine + (counter.CacheLine-unsafe.Sizeof(trackerHead{})%counter.CacheLine)%counter.CacheLine]byte
	shards [shardCount]shard

	stackFallbacks  atomic.Int64 // captures the frame-pointer walk could not serve
	stackMismatches atomic.Int64 // walks that named other frames than runtime.Callers
	stackUncached   atomic.Int64 // captures of walks a full cache could not keep
	freeLinesLost   atomic.Int64 // frees whose line the full free-line table could not keep

	nextID    atomic.Uint64
	liveBytes atomic.Int64 // of the records made before the tracker spread, for the peak
	peakBytes atomic.Int64
	gcLeaks   atomic.Int64
	misuse    atomic.Int64

	labelsTruncated atomic.Int64 // records whose labels were cut to the bounds
	events          [numEventKinds]atomic.Int64
	noteShard       atomic.Uint32 // spreads noted events over the history shards

	// feeds are the SiteFeeds, apart from the tracker: each Site points at
	// them, and a site an Owner's books keep must not keep the tracker.
	feeds        *feedSet
	classes      classRegistry // liveByClass
	leakWatchers watchers
	onLeak       leakQueue                    // the OnLeak callback's reports (leak.go)
	leaksLost    atomic.Int64                 // reports not delivered to a callback too far behind
	parts        partRegistry                 // what was made with the tracker (parts.go)
	locals       locals                       // what packages above track keep per tracker (Local)
	misuses      misuseLog                    // the latest misuses, for tests (NoteMisuse)
	handles      atomic.Pointer[HandleFinder] // package tensor's registry of handles (FindHandlesWith)
	requests     requestBook                  // the open requests, kept as they grow and end (requestbook.go)
	owners       ownerRegistry                // the owners tensors were handed to (owner.go)
	panics       partPanics                   // panics recovered from parts' code (panics.go)
	kinds        kindTable                    // what each kind of request cost (kinds.go)
	ooms         oomBook                      // allocations refused for lack of memory, per device (oom.go)
	borrows      borrowBook                   // handles taken under requests (borrow.go)
}

// trackerHead is the tracker's read-mostly fields, before its shards.
type trackerHead struct {
	cfg   config
	start time.Time
	// startUnix is start in Unix nanoseconds: unixAt's base, which a
	// request's listing reads once, where time.Time arithmetic costs tens
	// of nanoseconds.
	startUnix int64
	stacks    *stackTable
	walks     *walkCache
	spread    atomic.Bool // goroutines were seen to contend: see shardCount
}

// New returns an isolated Tracker.
func New(opts ...Option) (*Tracker, error) {
	cfg := defaultConfig()
	if err := applyOptions(&cfg, opts); err != nil {
		return nil, err
	}
	t := &Tracker{trackerHead: trackerHead{cfg: cfg, walks: newWalkCache(cfg.maxSites)}}
	t.start = t.Now()
	t.startUnix = t.start.UnixNano()
	t.requests.tracker = t
	t.kinds.keys = cfg.kindKeys
	t.feeds = new(feedSet)
	t.stacks = newStackTable(cfg.maxSites, cfg.helpers, t.feeds)
	if cfg.historyEvents > 0 {
		for i := range t.shards {
			t.shards[i].history.events = make([]Event, ringSize(cfg.historyEvents))
		}
	}
	if t.cfg.onLeak == nil {
		t.cfg.onLeak = t.logLeak
	}
	t.onLeak = leakQueue{t: t, f: t.cfg.onLeak}
	return t, nil
}

var defaultTracker = sync.OnceValue(func() *Tracker {
	t, _ := New(Name("default")) // the default options are valid
	return t
})

// Default returns the process's Tracker, made on first use.
func Default() *Tracker { return defaultTracker() }

// Name returns the tracker's name.
func (t *Tracker) Name() string { return t.cfg.name }

// Started returns when the tracker was made: event times count from it.
func (t *Tracker) Started() time.Time { return t.start }

// unixAt returns the moment at nanoseconds since the tracker's start (a
// record's birth, now()) in Unix nanoseconds.
func (t *Tracker) unixAt(since int64) int64 { return t.startUnix + since }

// Record adds r under ctx's labels and request, capturing the stack; skip as
// in pprof.Profile.Add, every function it passes over //go:noinline.
//
//go:noinline
func (bk *Books) Record(ctx context.Context, r *Record, skip int) error {
	t := (*Tracker)(bk)
	if err := t.admitNew(r); err != nil {
		return err
	}
	t.insert(ctx, r, t.site(skip))
	return nil
}

// admitNew checks that r may be recorded and marks it live.
func (t *Tracker) admitNew(r *Record) error {
	if r == nil {
		t.misuse.Add(1)
		return errNilRecord
	}
	if r.Bytes < 0 {
		t.misuse.Add(1)
		return fmt.Errorf("%w: negative byte count %d", ErrMisuse, r.Bytes)
	}
	if !r.word.CompareAndSwap(stateNew, stateLive) {
		t.misuse.Add(1)
		return errAlreadyRecorded
	}
	return nil
}

// insert records r, admitted, at site under ctx.
func (t *Tracker) insert(ctx context.Context, r *Record, site *Site) {
	sc := scopeOf(ctx)
	if sc.labels != nil && sc.labels.truncated {
		t.labelsTruncated.Add(1)
	}
	r.tracker = t
	r.site = site
	r.labels.Store(sc.labels)
	r.born = t.now()
	r.req = sc.req.join(t, r)

	m := metaOf(r)
	slot := site.metas.slot(m, r.Bytes) // lock-free: outside the shard's lock
	spread := t.spread.Load()
	var i uint32 // the shard
	var counted uint32
	if !spread {
		r.id = t.nextID.Add(1)
		i = uint32(r.id % shardCount)
		if v := t.liveBytes.Load(); v > math.MaxInt64-r.Bytes {
			// Past MaxInt64 live: the peak is held there, and this
			// record is left out of the uncontended sum, which cannot
			// wrap, and whose peak it can no longer raise.
			counter.RaisePeak(&t.peakBytes, math.MaxInt64)
		} else if t.liveBytes.CompareAndSwap(v, v+r.Bytes) {
			counter.RaisePeak(&t.peakBytes, v+r.Bytes)
			counted = totalFlag
		} else {
			t.spread.Store(true) // from the next record on
		}
	} else {
		i = recordHint() % shardCount
	}
	sh := &t.shards[i]
	sh.mu.Lock()
	if spread {
		r.id = sh.takeID(t, i)
	}
	r.next = sh.head
	if sh.head != nil {
		sh.head.prev = r
	}
	sh.head = r
	sh.allocs++
	sh.allocBytes.Add(r.Bytes)
	sh.liveBytes.Add(r.Bytes)
	sh.peakBytes = max(sh.peakBytes, sh.liveBytes.Load())
	class := sh.class(&t.classes, m.Device, m.Kind)
	r.word.Or(uint32(class)<<classShift | uint32(slot)<<slotShift | counted)
	c := &sh.classes[class]
	c.count++
	c.bytes.Add(r.Bytes)
	if t.cfg.historyEvents > 0 {
		sh.history.add(r.event(EventAlloc, r.born))
	}
	sh.mu.Unlock()

	// One add for the site's figures and its profile group alike
	// (counted.go): a slot's bytes are its count times its size.
	site.metas.made(slot, r.Bytes)
}

// takeID returns the next id of shard sh (index i) of a spread tracker,
// drawing a batch from the counter when the last is spent. Called with
// the shard's lock held.
func (sh *shardData) takeID(t *Tracker, i uint32) uint64 {
	if sh.idsLeft == 0 {
		end := t.nextID.Add(idBatch * shardCount)
		first := end - idBatch*shardCount + 1 // the batch is first..end
		sh.nextID = first + (uint64(i)+shardCount-first%shardCount)%shardCount
		sh.idsLeft = idBatch
	}
	id := sh.nextID
	sh.nextID += shardCount
	sh.idsLeft--
	return id
}

// recorder returns the tracker that recorded r, or the error of a record
// that was never recorded.
func (r *Record) recorder() (*Tracker, error) {
	if r == nil {
		return nil, errNilRecord
	}
	if r.tracker == nil {
		return nil, errNotRecorded
	}
	return r.tracker, nil
}

// Release removes r from its tracker's books; a second release is an error
// matching ErrMisuse, as is a record never recorded.
func (r *Record) Release() error {
	t, err := r.recorder()
	if err != nil {
		return err
	}
	for {
		w := r.word.Load()
		if w&stateMask != stateLive {
			t.misuse.Add(1)
			return errReleased(r, "released")
		}
		if r.word.CompareAndSwap(w, w&^stateMask|stateReleased) {
			break
		}
	}
	var at int64
	if t.cfg.historyEvents > 0 {
		at = t.now()
	}
	sh := &t.shards[r.id%shardCount]
	sh.mu.Lock()
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		sh.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	}
	r.prev, r.next = nil, nil
	outlived := r.leave()
	r.leaveOwners()
	w := r.word.Load()
	special := w&specialFlag != 0
	if special {
		delete(sh.special, r)
	}
	sh.frees++
	sh.liveBytes.Add(-r.Bytes)
	c := &sh.classes[w>>classShift]
	c.count--
	c.bytes.Add(-r.Bytes)
	if t.cfg.historyEvents > 0 {
		sh.history.add(r.event(EventFree, at))
	}
	sh.mu.Unlock()

	r.site.metas.released(int(w&slotMask)>>slotShift, r.Bytes, special)
	if hs := r.holders.Load(); hs != nil {
		hs.release(r)
	}
	if outlived {
		r.site.outlived(-r.Bytes, -1)
	}
	if w&totalFlag != 0 {
		t.liveBytes.Add(-r.Bytes)
	}
	return nil
}

// SetLabels replaces the labels of the live record r, for every handle (a
// cache labels what it adopts); a record not live is an error (ErrMisuse).
func (r *Record) SetLabels(l Labels) error {
	t, err := r.recorder()
	if err != nil {
		return err
	}
	if r.state() != stateLive {
		t.misuse.Add(1)
		return errReleased(r, "relabeled")
	}
	r.labels.Store(l.set)
	return nil
}

// Caller interns up to depth (<= 32) frames of the caller's stack, skip as in
// Record: the site of an event that is not an allocation.
func (bk *Books) Caller(skip, depth int) *Site {
	t := (*Tracker)(bk)
	var buf [maxDepth]uintptr
	depth = max(1, min(depth, maxDepth))
	n := runtime.Callers(skip+2, buf[:depth])
	return t.stacks.intern(buf[:n])
}

// CallerSite returns the caller's Site as Record captures it (skip as in
// Record): where an extra handle was made (Record.Hold).
//
//go:noinline
func (bk *Books) CallerSite(skip int) *Site {
	t := (*Tracker)(bk)
	return t.site(skip)
}

// Intern returns the Site of pcs, leaf first.
func (bk *Books) Intern(pcs []uintptr) *Site {
	t := (*Tracker)(bk)
	if len(pcs) > maxDepth {
		pcs = pcs[:maxDepth]
	}
	return t.stacks.intern(pcs)
}

// Totals are a tracker's counters at one moment.
type Totals struct {
	LiveCount        int64
	LiveBytes        int64
	PeakBytes        int64 // the highest LiveBytes seen: exact until goroutines contend, a lower bound after
	Allocs           int64 // since start
	AllocBytes       int64 // their bytes
	Frees            int64 // since start
	GCLeaks          int64 // handles found dropped
	Misuse           int64 // double frees, foreign releases, reuses
	Sites            int   // call stacks kept
	Overflowed       int64 // allocations past MaxSites
	OutlivedCount    int64 // live tensors that outlived their request: what a watcher judges
	OutlivedBytes    int64 // and their bytes
	LabelsTruncated  int64 // tensors recorded with labels cut to the bounds (WithLabels)
	StackFallbacks   int64 // captures the frame-pointer walk refused, served by runtime.Callers
	StackMismatches  int64 // walks not trusted, since they named other frames
	StackUncached    int64 // captures past a full walk cache, served by runtime.Callers
	FreeLinesLost    int64 // frees whose line the full free-line table lost
	HelpersUnmatched int   // HelperFunctions names no stack has matched yet
	PartPanics       int64 // calls into code tensorlife does not own that panicked, recovered (NotePanic), leak callbacks' included
	LeakReportsLost  int64 // leak reports a callback 4096 reports behind was not given (OnLeak); the leaks are counted all the same
	events           [numEventKinds]int64
}

// Event returns the count of events of kind k.
func (tt Totals) Event(k EventKind) int64 {
	if k >= numEventKinds {
		return 0
	}
	return tt.events[k]
}

// Totals reads the counters, O(shards + sites), not all at one instant.
//
// OutlivedCount and OutlivedBytes count a request's tensors as outlived
// once its end function (WithRequest's, httptrack's) has run. A request
// begun by WithLabels ends when its context is done, which tensorlife
// learns by looking: each reading of the gauges (Totals, SiteTotals,
// TopSites, the default profile's snapshot, a window's site feed,
// RequestCosts, OpenRequests) looks at 32 listed requests' contexts, a
// share of each shard of the book in turn, so with at most 32 requests
// open every reading sees every end at once, and with more one lags such
// an end by about ⌈open/32⌉ readings (up to twice that in a shard whose
// requests end faster than the others'). The readings that judge or show
// a request look at its context themselves and never lag: a filtered
// snapshot (Filter.Outlived, Filter.Request: tracktest), OpenRequests'
// rows.
func (t *Tracker) Totals() Totals {
	t.sweep()
	var tt Totals
	var shardPeak int64
	// A shard's byte figures are exact in 128 bits (counter.Sum), and so
	// are their sums over shards, so that no total wraps.
	var allocBytes, liveBytes counter.Sum
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		tt.Allocs += sh.allocs
		allocBytes.AddSum(sh.allocBytes)
		liveBytes.AddSum(sh.liveBytes)
		tt.Frees += sh.frees
		shardPeak = max(shardPeak, sh.peakBytes)
		sh.mu.Unlock()
	}
	tt.LiveCount = tt.Allocs - tt.Frees
	tt.AllocBytes, tt.LiveBytes = allocBytes.Load(), liveBytes.Load()
	counter.RaisePeak(&t.peakBytes, max(tt.LiveBytes, shardPeak)) // see shardCount
	tt = Totals{
		LiveCount:  tt.LiveCount,
		LiveBytes:  tt.LiveBytes,
		PeakBytes:  t.peakBytes.Load(),
		Allocs:     tt.Allocs,
		AllocBytes: tt.AllocBytes,
		Frees:      tt.Frees,
		GCLeaks:    t.gcLeaks.Load(),
		Misuse:     t.misuse.Load(),
		Sites:      int(t.stacks.count.Load()),
		Overflowed: t.stacks.overflow.metas.allocated(),

		LabelsTruncated: t.labelsTruncated.Load(),

		StackFallbacks:  t.stackFallbacks.Load(),
		StackMismatches: t.stackMismatches.Load(),
		StackUncached:   t.stackUncached.Load(),
		FreeLinesLost:   t.freeLinesLost.Load(),

		HelpersUnmatched: t.cfg.helpers.unmatched(),
		PartPanics:       t.panics.count.Load(),
		LeakReportsLost:  t.leaksLost.Load(),
	}
	// Summed from the sites when asked, not kept tracker-wide: a shared
	// counter would be one more contended cache line on the record path.
	var outlivedCount, outlivedBytes counter.Sum
	for _, s := range t.stacks.sites() {
		n, bytes, _, _ := s.outlivedFigures()
		outlivedCount.AddUint(uint64(n))
		outlivedBytes.AddSum(bytes)
	}
	tt.OutlivedCount, tt.OutlivedBytes = outlivedCount.Load(), max(outlivedBytes.Load(), 0)
	for i := range tt.events {
		tt.events[i] = t.events[i].Load()
	}
	tt.events[EventAlloc] = tt.Allocs
	tt.events[EventFree] = tt.Frees
	tt.events[EventGCLeak] = tt.GCLeaks
	return tt
}

// liveByClass calls f with the live figures of each device and kind that
// holds live tensors, by device then kind, from counters; past 63 classes
// the rest count as kind "tensorlife.other" (Books.LiveByClass).
func (t *Tracker) liveByClassEach(f func(device, kind string, count, bytes int64)) {
	var sums [maxClasses]liveCount
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for id, c := range sh.classes {
			sums[id].count += c.count
			sums[id].bytes.AddSum(c.bytes)
		}
		sh.mu.Unlock()
	}
	type class struct {
		key   classKey
		count int64
		bytes int64
	}
	var out []class
	for id, c := range sums {
		if c.count != 0 || c.bytes != (counter.Sum{}) {
			out = append(out, class{t.classes.name(id), c.count, max(c.bytes.Load(), 0)})
		}
	}
	slices.SortFunc(out, func(a, b class) int {
		return cmp.Or(strings.Compare(a.key.device, b.key.device), strings.Compare(a.key.kind, b.key.kind))
	})
	for _, c := range out {
		f(c.key.device, c.key.kind, c.count, c.bytes)
	}
}

// logLeak is the default OnLeak callback.
func (t *Tracker) logLeak(l LeakReport) {
	t.cfg.logger.Warn("tensorlife: tensor leaked: garbage collected without Free",
		slog.String("tracker", t.cfg.name),
		slog.Uint64("id", l.ID),
		slog.Int64("bytes", l.Bytes),
		slog.String("kind", l.Kind),
		slog.String("holder", l.Holder.String()),
		slog.String("dtype", l.DType),
		slog.Any("shape", l.Shape),
		slog.String("labels", l.Labels.String()),
		slog.String("site", l.Site.String()),
		slog.Bool("reclaimed", l.Reclaimed),
		slog.String("stack", l.Site.Stack("")))
}

func (r *Record) event(k EventKind, at int64) Event {
	m := metaOf(r)
	return Event{Kind: k, Time: at, ID: r.id, Bytes: r.Bytes, Site: r.site, AllocKind: m.Kind, Device: m.Device, Labels: r.Labels()}
}

// time returns when r was recorded.
func (r *Record) time() time.Time {
	if r.tracker == nil {
		return time.Time{}
	}
	return r.tracker.start.Add(time.Duration(r.born))
}

// Books is a tracker as the allocators and tools built on it see it: how
// an allocation is recorded (Record, the call sites, free lines, notes of
// misuse, panics and refusals) and the counters that reports, dumps,
// watchers and test helpers read (HeldBy, the site feed, the copied
// counts, the parts). A service needs none of it: *Tracker is its API.
// Books keeps these apart by type, as log/slog keeps a Handler's API apart
// from a Logger's; it is the same tracker, at no cost (Tracker.Books is a
// conversion), and as safe for concurrent use.
type Books Tracker

// Books returns t's books: what an allocator or a tool calls.
func (t *Tracker) Books() *Books { return (*Books)(t) }
