package pprofexport

import (
	"context"
	"time"
)

// WindowClock makes a handler end each delta window by calling wait, on the
// request's goroutine between the window's two snapshots, instead of
// waiting d on the real clock. Tests use it to run windows at once, or to
// act inside one.
func WindowClock(wait func(ctx context.Context, d time.Duration) error) HandlerOption {
	return handlerOption(func(c *config) error {
		c.window = wait
		return nil
	})
}

// Instant is a WindowClock wait that ends the window at once, or with the
// request's context when that ended first.
func Instant(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// Clock makes a handler read now for ?gc=1's rate limit instead of the
// real clock.
func Clock(now func() time.Time) HandlerOption {
	return handlerOption(func(c *config) error {
		c.now = now
		return nil
	})
}
