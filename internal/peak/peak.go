// Package peak keeps high-water marks in atomic counters: the peak bytes an
// allocator has held, raised by whichever goroutine reaches a new one.
package peak

import "sync/atomic"

// Raise lifts peak to v if v is higher. The load alone is the common case;
// goroutines raising it at once leave the highest of their values. Safe for
// concurrent use.
func Raise(peak *atomic.Int64, v int64) {
	for old := peak.Load(); v > old; old = peak.Load() {
		if peak.CompareAndSwap(old, v) {
			return
		}
	}
}
