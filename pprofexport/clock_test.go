package pprofexport_test

import (
	"sync"
	"time"
)

// fakeClock is a tracker clock (track.Clock) that moves only when told, so
// a test ages tensors without waiting.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)}
}

// Now is the clock's time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
