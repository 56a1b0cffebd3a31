package mask

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/track"
)

// Cache keeps masks that many requests share, such as the mask of a
// repeated system prompt, under a byte budget and an entry bound, evicting
// the least recently used. It replaces the unbounded global map of masks
// that never lets one go.
//
// The cache is an owner of each tensor it holds (tensor.Tensor.Retain). A
// hit hands the caller a handle of its own, which the caller must Free;
// evicting an entry frees only the cache's handle, so a mask that a request
// still uses stays valid until that request frees it.
//
// The budget (MaxBytes) counts what each entry costs: the device memory its
// handle holds (tensor.Tensor.HeldBytes: not what the allocator rounded it
// to, and a view's whole parent), the length of its key, and
// CacheEntryOverhead for the host memory the entry itself takes, so that
// neither large masks nor many long keys get past it. A key is at most
// MaxKeyBytes long.
//
// The cache hands each mask it keeps to its own track.Owner, named after
// the cache and bounded by MaxBytes. The owner's books are what the cache
// holds at every reading: an eviction gives the mask back in the same step
// (under the cache's lock) as it leaves the cache, and Put makes room
// before the owner takes the new entry. The owner counts the masks' device
// bytes, the cache's Bytes those and the keys and CacheEntryOverhead
// besides, so the owner never holds more than the cache's Bytes, and never
// more than its bound.
//
// A Cache is safe for concurrent use. One mutex guards the map and the LRU
// list: every operation under it is O(1) (a map lookup, a list move, a
// Retain), it is taken once per request that looks a mask up rather than
// per token, and it is let go by defer, so a panic or a runtime.Goexit in
// anything a call runs leaves it free. No device call is made under it:
// an evicted mask's handle is freed under it, in the same step as it
// leaves the cache (the handle, the record and the owner's books), and
// its memory goes back to the allocator after the unlock
// (tensor.Tensor.FreeInto), so a slow device Free never stalls a reader.
// The counters are atomics, so Stats and metrics never wait for it.
type Cache struct {
	cfg    cacheConfig
	labels track.Labels // what adopted masks are labelled with: {cache=<name>}
	owner  track.Owner  // what they are handed to: bounded by MaxBytes

	mu      sync.Mutex
	entries map[string]*lruElem[cacheEntry]
	order   lruList[cacheEntry]
	used    int64 // bytes, under mu
	closed  bool

	hits, misses, evictions, rejected atomic.Int64
	bytes, count                      atomic.Int64 // mirrors of used and len(entries)

	// tracker is the one the cache attached itself to (track.Attach): that
	// of the first mask it kept, so that a summary of the tracker lists
	// the cache with nothing passed.
	tracker atomic.Pointer[track.Tracker]
}

// CacheOwner is how reports name a Cache's own handle on a mask it keeps:
// "held by a mask cache entry made at ..." (tensor.Tensor.RetainFor).
const CacheOwner = "mask cache entry"

const (
	// MaxKeyBytes bounds the length of a Cache key. A key names a mask
	// (a prompt's length, a digest of a system prompt); hash anything
	// longer, such as a prompt's text, into a digest first.
	MaxKeyBytes = 4 << 10
	// CacheEntryOverhead is what a Cache's budget counts for each entry
	// besides its mask and its key: the host memory of the entry (its map
	// slot, its list element, the cache's own handle on the mask and what
	// that handle keeps for its hand-over to the cache's owner), measured
	// at about 270 bytes of Go heap with the runtime's cleanup record of
	// the handle.
	CacheEntryOverhead = 320
)

// entryCost is what an entry under key holding held bytes counts against
// the budget.
func entryCost(key string, held int64) int64 {
	return held + int64(len(key)) + CacheEntryOverhead
}

// checkKey refuses a key longer than MaxKeyBytes; op names the method.
func checkKey(op, key string) error {
	if len(key) <= MaxKeyBytes {
		return nil
	}
	return fmt.Errorf("%w: Cache.%s: a key of %d bytes; at most %d", ErrKeyTooLong, op, len(key), MaxKeyBytes)
}

// quoteKey quotes key for an error message, cut to a readable length.
func quoteKey(key string) string {
	const shown = 64
	if len(key) <= shown {
		return strconv.Quote(key)
	}
	return strconv.Quote(strings.ToValidUTF8(key[:shown], "")) + fmt.Sprintf("... (%d bytes)", len(key))
}

type cacheEntry struct {
	key   string
	t     *tensor.Tensor // the cache's own handle
	bytes int64          // what the entry counts against the budget (entryCost)
}

// NewCache returns an empty Cache. Options (MaxBytes, MaxEntries,
// CacheName, CacheTracker) are validated here; an invalid one returns an error matching
// ErrInvalidOption.
func NewCache(opts ...CacheOption) (*Cache, error) {
	cfg, err := newCacheConfig(opts)
	if err != nil {
		return nil, err
	}
	c := &Cache{cfg: cfg, labels: track.NewLabels("cache", cfg.name),
		owner:   track.Owner{Name: cfg.name, MaxBytes: cfg.maxBytes},
		entries: make(map[string]*lruElem[cacheEntry])}
	if cfg.tracker != nil {
		c.tracker.Store(cfg.tracker)
		track.Attach(cfg.tracker, c)
	}
	return c, nil
}

// Get returns the caller's own handle on the mask cached under key, which
// the caller must Free, and true; or nil and false on a miss. A nil Cache
// always misses. The handle is taken under no request: GetOrBuild takes it
// under its context's, so that a handle a request forgets to free is named
// when the request ends.
func (c *Cache) Get(key string) (*tensor.Tensor, bool) { return c.get(context.Background(), key) }

// get is Get, the handle taken under ctx's request (tensor.Tensor.
// RetainContext).
func (c *Cache) get(ctx context.Context, key string) (*tensor.Tensor, bool) {
	if c == nil || len(key) > MaxKeyBytes {
		return nil, false // no such key can have been cached
	}
	t := c.retain(ctx, key)
	if t == nil {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return t, true
}

// retain returns a handle of the caller's, taken under ctx's request, on
// the mask under key; nil if none.
func (c *Cache) retain(ctx context.Context, key string) *tensor.Tensor {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil {
		return nil
	}
	t, err := e.Value.t.RetainContext(ctx)
	if err != nil {
		// Only the cache holds e.t, so this means someone freed a handle
		// they did not own; drop the entry rather than serve it.
		c.unlink(e)
		c.publish()
		return nil
	}
	c.order.MoveToFront(e)
	return t
}

// Put caches t under key, replacing any mask cached there, and evicts least
// recently used masks until the budget holds. The cache takes a handle of
// its own: the caller keeps t and still frees it. A mask whose entry would
// cost more than the whole budget (see Cache), or any mask when MaxEntries
// or MaxBytes is 0, is not cached (counted in Stats.Rejected) and Put
// returns nil: the caller's mask is still correct, it is just not shared.
// A key longer than MaxKeyBytes is an error matching ErrKeyTooLong, and
// nothing changes. A rejected Put still replaces: the
// mask cached under key before is dropped, so Get never serves content the
// caller has since replaced. A mask the cache keeps is labelled
// {cache=<name>} (CacheName) from then on, for every handle of it: it is
// the cache's memory now, not the request's that made it.
func (c *Cache) Put(key string, t *tensor.Tensor) (err error) {
	if err := checkKey("Put", key); err != nil {
		return fmt.Errorf("mask: %w", err)
	}
	if c == nil {
		return fmt.Errorf("mask: Cache.Put %s: %w", quoteKey(key), ErrNilCache)
	}
	if t == nil {
		return fmt.Errorf("mask: Cache.Put %s: %w", quoteKey(key), ErrNilMask)
	}
	_, err = c.store(key, t)
	return err
}

// store is Put's work once its arguments are checked; it reports whether
// the cache kept t.
func (c *Cache) store(key string, t *tensor.Tensor) (kept bool, err error) {
	own, err := t.RetainFor(CacheOwner)
	if err != nil {
		return false, fmt.Errorf("mask: Cache.Put %s: %w", quoteKey(key), err)
	}
	// A view keeps its whole parent allocation alive: the budget counts what
	// the cached handle holds, not the bytes it shows.
	bytes := entryCost(key, own.HeldBytes())
	// What leaves the cache is freed under the lock and given back to its
	// allocator after it, also if something panics in between.
	var later tensor.Releases
	defer func() { err = errors.Join(err, later.Run()) }()
	kept, err = c.put(key, own, bytes, &later)
	if kept {
		c.attach(own)
	}
	return kept, err
}

// put is Put's work under c.mu: own is the cache's handle on the mask, of
// cost bytes. It reports whether the cache kept it; what it frees, own
// included when not kept, goes into later.
func (c *Cache) put(key string, own *tensor.Tensor, bytes int64, later *tensor.Releases) (kept bool, err error) {
	rejected := bytes > c.cfg.maxBytes || c.cfg.maxBytes == 0 || c.cfg.maxEntries == 0
	var errs []error
	var n int64 // evictions
	c.mu.Lock()
	defer func() {
		c.publish()
		c.mu.Unlock()
		c.evictions.Add(n)
	}()
	if c.closed {
		return false, errors.Join(fmt.Errorf("mask: Cache.Put %s: %w", quoteKey(key), ErrCacheClosed), own.FreeInto(later))
	}
	if old := c.entries[key]; old != nil {
		errs = append(errs, c.evict(old, later))
	}
	if rejected {
		c.rejected.Add(1)
		return false, errors.Join(append(errs, own.FreeInto(later))...)
	}
	// Make room first, so that the owner gives back what the cache evicts
	// (evict) before it takes the new entry: no reading of its books sees
	// both. The new entry fits the budget on its own, so the loop stops
	// before the cache is empty.
	for c.used+bytes > c.cfg.maxBytes || len(c.entries)+1 > c.cfg.maxEntries {
		errs = append(errs, c.evict(c.order.Back(), later))
		n++
	}
	// The cache owns the mask from now on: label it as the cache's, so a
	// profile filtered by request does not show shared memory under the
	// request that happened to build it, and hand it to the cache as its
	// owner, whose byte budget bounds it, so that no watcher judges it as
	// memory that outlived its request. O(1) under mu.
	if err := errors.Join(own.SetLabels(c.labels), own.HandTo(&c.owner)); err != nil {
		return false, errors.Join(append(errs, fmt.Errorf("mask: Cache.Put %s: %w", quoteKey(key), err), own.FreeInto(later))...)
	}
	e := &lruElem[cacheEntry]{Value: cacheEntry{key: key, t: own, bytes: bytes}}
	c.entries[key] = e
	c.order.PushFront(e)
	c.used += bytes
	return true, errors.Join(errs...)
}

// attach attaches c to the tracker of t's allocator the first time c keeps
// a mask of it: a load and a compare after that.
func (c *Cache) attach(t *tensor.Tensor) {
	a := t.Allocator()
	if a == nil {
		return
	}
	tr := a.Tracker()
	if tr == nil || c.tracker.Load() == tr {
		return
	}
	if old := c.tracker.Swap(tr); old != tr {
		track.Detach(old, c) // a cache reports to one tracker: the latest
		track.Attach(tr, c)
		if c.Closed() {
			track.Detach(tr, c) // a Close that ran meanwhile detached the old one only
		}
	}
}

// GetOrBuild returns the caller's own handle on the mask cached under key,
// building it with build (under ctx) and caching it on a miss. The caller
// frees the result. The handle, a hit's or a miss's once the cache keeps
// the mask, is taken under ctx's request (tensor.Tensor.RetainContext):
// one still held when the request ends has outlived it, and a growth
// watcher names the line that called GetOrBuild, while the cache still
// keeps the mask. A mask the cache did not keep is returned as build made
// it, the request's own. A build error is returned as is and nothing is cached.
// Concurrent misses on one key may each build; the last to finish stays
// cached, and every caller gets a correct mask.
//
// A mask the cache keeps is labelled {cache=<name>} (CacheName) from then
// on, not with the labels of the request that built it: a profile
// filtered by request shows only what the request itself holds. A key
// longer than MaxKeyBytes is an error matching ErrKeyTooLong, before
// anything is built.
func (c *Cache) GetOrBuild(ctx context.Context, key string, build func(context.Context) (*tensor.Tensor, error)) (*tensor.Tensor, error) {
	if err := checkKey("GetOrBuild", key); err != nil {
		return nil, fmt.Errorf("mask: %w", err)
	}
	if c == nil {
		return nil, fmt.Errorf("mask: Cache.GetOrBuild %s: %w", quoteKey(key), ErrNilCache)
	}
	if build == nil {
		return nil, fmt.Errorf("mask: Cache.GetOrBuild %s: %w: nil build function", quoteKey(key), ErrInvalidOption)
	}
	if c.Closed() {
		return nil, fmt.Errorf("mask: Cache.GetOrBuild %s: %w", quoteKey(key), ErrCacheClosed)
	}
	if t, ok := c.get(ctx, key); ok { // the request's handle, named if it outlives the request
		return t, nil
	}
	t, err := build(ctx)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("mask: Cache.GetOrBuild %s: %w", quoteKey(key), ErrNilMask)
	}
	kept, err := c.store(key, t)
	if err != nil && !errors.Is(err, ErrCacheClosed) {
		// Closed while building: the mask is still correct, only not
		// shared. Anything else means t is unusable.
		if t.Freed() {
			return nil, err // the build function freed it: freeing again would be a double free
		}
		return nil, joinFree(err, t)
	}
	if !kept {
		return t, nil // the request's own tensor, judged as any it makes
	}
	// The cache keeps the mask now: the caller's handle on it is taken
	// under ctx's request, as a hit's is, so that one the request forgets
	// is named when the request ends, while the cache still holds the
	// mask, rather than once an eviction leaves it to grow.
	r, err := t.RetainContext(ctx)
	if err != nil {
		return t, nil
	}
	if err := t.Free(); err != nil {
		return nil, joinFree(err, r)
	}
	return r, nil
}

// Purge drops every entry, freeing the cache's handles; the cache stays
// usable. Masks that requests hold stay valid.
func (c *Cache) Purge() (err error) {
	if c == nil {
		return nil
	}
	var later tensor.Releases
	defer func() { err = errors.Join(err, later.Run()) }()
	return c.purge(&later)
}

// purge is Purge's work under c.mu; the memory goes into later.
func (c *Cache) purge(later *tensor.Releases) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, e := range c.entries {
		errs = append(errs, e.Value.t.FreeInto(later))
	}
	clear(c.entries)
	c.order.Clear()
	c.used = 0
	c.publish()
	return errors.Join(errs...)
}

// Close purges the cache and refuses later Put and GetOrBuild calls with
// ErrCacheClosed; Get misses. Closing twice is harmless.
func (c *Cache) Close() error {
	if c == nil {
		return nil
	}
	c.setClosed()
	track.Detach(c.tracker.Load(), c)
	return c.Purge()
}

// setClosed marks c closed.
func (c *Cache) setClosed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

// Closed reports whether Close has been called.
func (c *Cache) Closed() bool {
	if c == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// CacheStats are a Cache's figures. Each is exact; they are not read at one
// instant together.
type CacheStats struct {
	Name string
	// Bytes is what the cache's entries count against its budget: their
	// masks' held bytes, their keys and CacheEntryOverhead each (see
	// Cache); Entries is how many it holds.
	Bytes      int64
	Entries    int64
	MaxBytes   int64 // the byte budget (the cache's MaxBytes option)
	MaxEntries int64 // the entry bound
	Hits       int64
	Misses     int64
	Evictions  int64 // entries dropped to keep the bounds
	Rejected   int64 // entries not cached: costing more than the budget
}

// PartInfo says what the cache is, for its tracker's readers (a Cache is a
// track.Part): a part that holds no device memory of its own, since its
// masks' blocks are their allocator's. A summary reads its Stats.
func (c *Cache) PartInfo() track.PartInfo { return track.PartInfo{Kind: "cache", Left: -1} }

// Stats reads the cache's figures without
// waiting for its lock. Each figure is exact; they are not read at one
// instant together. Evictions count entries dropped to keep the bounds;
// replacing a key and Purge are not evictions. Rejected counts masks Put did
// not cache because they were larger than the budget or the cache holds
// nothing. A nil Cache has zero figures.
func (c *Cache) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	return CacheStats{
		Name: c.cfg.name, Bytes: c.bytes.Load(), Entries: c.count.Load(),
		MaxBytes: c.cfg.maxBytes, MaxEntries: int64(c.cfg.maxEntries),
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(), Rejected: c.rejected.Load(),
	}
}

// unlink takes e out of the map and the list; the caller holds c.mu.
func (c *Cache) unlink(e *lruElem[cacheEntry]) {
	c.order.Remove(e)
	delete(c.entries, e.Value.key)
	c.used -= e.Value.bytes
}

// evict unlinks e and frees the cache's handle on it in the same step, so
// that the owner's books are what the cache holds at every reading, and a
// mask nobody else holds leaves the live set at once rather than reading,
// for a moment, as memory that outlived its request. The caller holds
// c.mu: the memory's return to its allocator, a call into the allocator
// and maybe its device, goes into later, run after the unlock.
func (c *Cache) evict(e *lruElem[cacheEntry], later *tensor.Releases) error {
	c.unlink(e)
	return e.Value.t.FreeInto(later)
}

// publish copies the figures that mu guards to their atomic mirrors. The
// caller holds c.mu and calls it once an operation is complete, so Stats
// never sees a budget overrun halfway through an eviction.
func (c *Cache) publish() {
	c.bytes.Store(c.used)
	c.count.Store(int64(len(c.entries)))
}
