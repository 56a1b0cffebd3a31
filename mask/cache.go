package mask

import (
	"context"
	"errors"
	"fmt"
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
// still uses stays valid until that request frees it. The budget counts
// each mask's Bytes, not what the allocator rounded it to.
//
// A Cache is safe for concurrent use. One mutex guards the map and the LRU
// list: every operation under it is O(1) (a map lookup, a list move, a
// Retain), it is taken once per request that looks a mask up rather than
// per token, and masks are freed after it is released. The counters are
// atomics, so Stats and metrics never wait for it.
type Cache struct {
	cfg config

	mu      sync.Mutex
	entries map[string]*cacheEntry
	lru     cacheEntry // sentinel: lru.next is the most recently used
	used    int64      // bytes, under mu
	closed  bool

	hits, misses, evictions, rejected atomic.Int64
	bytes, count                      atomic.Int64 // mirrors of used and len(entries)
}

type cacheEntry struct {
	key        string
	t          *tensor.Tensor // the cache's own handle
	bytes      int64
	prev, next *cacheEntry
}

// NewCache returns an empty Cache. Options (MaxBytes, MaxEntries,
// CacheName) are validated here; an invalid one returns an error matching
// ErrInvalidOption.
func NewCache(opts ...Option) (*Cache, error) {
	cfg, err := newConfig(forCache, opts)
	if err != nil {
		return nil, err
	}
	c := &Cache{cfg: cfg, entries: make(map[string]*cacheEntry)}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c, nil
}

// Get returns the caller's own handle on the mask cached under key, which
// the caller must Free, and true; or nil and false on a miss.
func (c *Cache) Get(key string) (*tensor.Tensor, bool) {
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		c.mu.Unlock()
		c.misses.Add(1)
		return nil, false
	}
	t, err := e.t.Retain()
	if err != nil {
		// Only the cache holds e.t, so this means someone freed a handle
		// they did not own; drop the entry rather than serve it.
		c.remove(e)
		c.publish()
		c.mu.Unlock()
		c.misses.Add(1)
		return nil, false
	}
	c.unlink(e)
	c.pushFront(e)
	c.mu.Unlock()
	c.hits.Add(1)
	return t, true
}

// Put caches t under key, replacing any mask cached there, and evicts least
// recently used masks until the budget holds. The cache takes a handle of
// its own: the caller keeps t and still frees it. A mask larger than the
// whole budget, or any mask when MaxEntries or MaxBytes is 0, is not cached
// (counted in Stats.Rejected) and Put returns nil: the caller's mask is
// still correct, it is just not shared.
func (c *Cache) Put(key string, t *tensor.Tensor) error {
	if t == nil {
		return fmt.Errorf("mask: Cache.Put %q: %w", key, ErrNilMask)
	}
	own, err := t.Retain()
	if err != nil {
		return fmt.Errorf("mask: Cache.Put %q: %w", key, err)
	}
	// A view keeps its whole parent allocation alive: the budget counts what
	// the cached handle holds, not the bytes it shows.
	bytes := own.HeldBytes()
	if bytes > c.cfg.maxBytes || c.cfg.maxBytes == 0 || c.cfg.maxEntries == 0 {
		c.rejected.Add(1)
		return own.Free()
	}
	e := &cacheEntry{key: key, t: own, bytes: bytes}
	var evicted []*tensor.Tensor
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.Join(fmt.Errorf("mask: Cache.Put %q: %w", key, ErrCacheClosed), own.Free())
	}
	if old := c.entries[key]; old != nil {
		c.remove(old)
		evicted = append(evicted, old.t)
	}
	c.entries[key] = e
	c.pushFront(e)
	c.used += bytes
	// The new entry fits the budget on its own, so the loop stops before
	// reaching it.
	var n int64
	for c.used > c.cfg.maxBytes || len(c.entries) > c.cfg.maxEntries {
		victim := c.lru.prev
		c.remove(victim)
		evicted = append(evicted, victim.t)
		n++
	}
	c.publish()
	c.mu.Unlock()
	c.evictions.Add(n)
	return freeAll(evicted)
}

// GetOrBuild returns the caller's own handle on the mask cached under key,
// building it with build (under ctx) and caching it on a miss. The caller
// frees the result. A build error is returned as is and nothing is cached.
// Concurrent misses on one key may each build; the last to finish stays
// cached, and every caller gets a correct mask.
//
// The mask's allocation record keeps the labels of the request that built
// it, so a profile shows which request first paid for a shared mask.
func (c *Cache) GetOrBuild(ctx context.Context, key string, build func(context.Context) (*tensor.Tensor, error)) (*tensor.Tensor, error) {
	if build == nil {
		return nil, fmt.Errorf("mask: Cache.GetOrBuild %q: %w: nil build function", key, ErrInvalidOption)
	}
	if c.Closed() {
		return nil, fmt.Errorf("mask: Cache.GetOrBuild %q: %w", key, ErrCacheClosed)
	}
	if t, ok := c.Get(key); ok {
		return t, nil
	}
	t, err := build(ctx)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("mask: Cache.GetOrBuild %q: %w", key, ErrNilMask)
	}
	if err := c.Put(key, t); err != nil && !errors.Is(err, ErrCacheClosed) {
		// Closed while building: the mask is still correct, only not
		// shared. Anything else means t is unusable.
		return nil, joinFree(err, t)
	}
	return t, nil
}

// Purge drops every entry, freeing the cache's handles; the cache stays
// usable. Masks that requests hold stay valid.
func (c *Cache) Purge() error {
	c.mu.Lock()
	evicted := make([]*tensor.Tensor, 0, len(c.entries))
	for _, e := range c.entries {
		evicted = append(evicted, e.t)
	}
	clear(c.entries)
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	c.used = 0
	c.publish()
	c.mu.Unlock()
	return freeAll(evicted)
}

// Close purges the cache and refuses later Put and GetOrBuild calls with
// ErrCacheClosed; Get misses. Closing twice is harmless.
func (c *Cache) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.Purge()
}

// Closed reports whether Close has been called.
func (c *Cache) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Stats are a Cache's figures at one moment.
type Stats struct {
	Hits, Misses int64
	// Evictions counts entries dropped to keep the budget; replacing a key
	// and Purge are not evictions.
	Evictions int64
	// Rejected counts masks Put did not cache because they were larger than
	// the budget or the cache holds nothing.
	Rejected   int64
	Bytes      int64 // bytes of the masks held
	Entries    int64
	MaxBytes   int64
	MaxEntries int64
}

// Stats reads the cache's counters without waiting for its lock. Each
// figure is exact; they are not read at one instant together.
func (c *Cache) Stats() Stats {
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(), Rejected: c.rejected.Load(),
		Bytes: c.bytes.Load(), Entries: c.count.Load(),
		MaxBytes: c.cfg.maxBytes, MaxEntries: int64(c.cfg.maxEntries),
	}
}

// CacheStats returns the figures metrics read: a Cache is a
// track.CacheSource.
func (c *Cache) CacheStats() track.CacheStats {
	s := c.Stats()
	return track.CacheStats{
		Name: c.cfg.name, Bytes: s.Bytes, Entries: s.Entries,
		BudgetBytes: s.MaxBytes, MaxEntries: s.MaxEntries,
		Hits: s.Hits, Misses: s.Misses, Evictions: s.Evictions,
	}
}

// remove takes e out of the map and the list; the caller holds c.mu and
// frees e.t after releasing it.
func (c *Cache) remove(e *cacheEntry) {
	c.unlink(e)
	delete(c.entries, e.key)
	c.used -= e.bytes
}

// publish copies the figures that mu guards to their atomic mirrors. The
// caller holds c.mu and calls it once an operation is complete, so Stats
// never sees a budget overrun halfway through an eviction.
func (c *Cache) publish() {
	c.bytes.Store(c.used)
	c.count.Store(int64(len(c.entries)))
}

func (c *Cache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache) pushFront(e *cacheEntry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func freeAll(ts []*tensor.Tensor) error {
	var errs []error
	for _, t := range ts {
		if err := t.Free(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
