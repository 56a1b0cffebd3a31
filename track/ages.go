package track

import "sync"

// ageBuckets is B, how many recent generations of the age clock a site
// counts one by one; older live bytes are summed in one total. It bounds the
// SurvivorAge option: 17 words per site.
const ageBuckets = 8

// siteAges counts a site's live allocations by the generation of the
// tracker's age clock they were recorded in: one bucket for each of the
// latest ageBuckets generations and one total for every older one. Records
// and releases add to one bucket; when the clock has moved since the site
// was last touched, the buckets that fell out of the window are folded into
// the old total first (at most ageBuckets of them, so the cost is O(1)
// amortized and exact). A watcher reads the bytes born at least A
// generations ago without walking the live set.
//
// A mutex of its own, not atomics: a record's bucket depends on the clock,
// and folding a bucket must not race a release of one of its records.
type siteAges struct {
	mu                 sync.Mutex
	base               uint64 // the latest generation folded in; buckets hold base-B+1..base
	bytes              [ageBuckets]int64
	count              [ageBuckets]int64
	oldBytes, oldCount int64
}

// advance folds the buckets of generations older than clock-B+1 into the old
// totals. Called with a.mu held.
func (a *siteAges) advance(clock uint64) {
	if clock <= a.base {
		return
	}
	steps := min(clock-a.base, ageBuckets)
	for g := clock - steps + 1; g <= clock; g++ {
		// The bucket of g held generation g-B, which is now old.
		i := g % ageBuckets
		a.oldBytes += a.bytes[i]
		a.oldCount += a.count[i]
		a.bytes[i], a.count[i] = 0, 0
	}
	a.base = clock
}

// add counts bytes (negative on release) of one record born in generation
// gen, the clock being at clock (never behind gen).
func (a *siteAges) add(gen, clock uint64, bytes, count int64) {
	a.mu.Lock()
	a.advance(clock)
	// gen is never past base, the clock having just been folded in; if it
	// were, base-gen would wrap past ageBuckets and count it old.
	if a.base-gen >= ageBuckets {
		a.oldBytes += bytes
		a.oldCount += count
	} else {
		i := gen % ageBuckets
		a.bytes[i] += bytes
		a.count[i] += count
	}
	a.mu.Unlock()
}

// survivors returns the live bytes and count born at least age generations
// before clock (age at most ageBuckets).
func (a *siteAges) survivors(clock uint64, age int) (bytes, count int64) {
	a.mu.Lock()
	a.advance(clock)
	bytes, count = a.oldBytes, a.oldCount
	for d := uint64(age); d < ageBuckets && d <= a.base; d++ {
		i := (a.base - d) % ageBuckets
		bytes += a.bytes[i]
		count += a.count[i]
	}
	a.mu.Unlock()
	return bytes, count
}
