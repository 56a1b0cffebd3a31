package track

// LeakReport describes a tensor that the garbage collector found unreachable
// while it was still live: it was dropped without Free.
type LeakReport struct {
	Allocation
	// Reclaimed reports whether the memory is being returned to its allocator
	// (the tracker's ReclaimLeaks option).
	Reclaimed bool
}

// ReportLeak marks r as leaked: counted, reported through the OnLeak callback,
// and flagged in snapshots. The owner of r (package tensor) calls it from a
// runtime cleanup once a handle is unreachable, then returns the memory and
// releases r if ReclaimLeaks is true. It reports each record once and
// returns whether this call reported it; records not live in t are ignored.
func (t *Tracker) ReportLeak(r *Record) bool {
	if r == nil || r.tracker != t || r.state.Load() != stateLive || r.leaked.Swap(true) {
		return false
	}
	t.gcLeaks.Add(1)
	r.site.gcLeaks.Add(1)
	if t.cfg.historyEvents > 0 {
		at := t.now()
		sh := &t.shards[r.id%shardCount]
		sh.mu.Lock()
		sh.history.add(r.event(EventGCLeak, at))
		sh.mu.Unlock()
	}
	t.cfg.onLeak(LeakReport{Allocation: r.allocation(), Reclaimed: t.cfg.reclaimLeaks})
	return true
}
