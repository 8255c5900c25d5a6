// Package clock holds Kassa's handling of time that is not a domain rule: periodic background work,
// and a manual clock that tests inject wherever a component takes a Now function.
package clock

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Every calls f every interval until ctx is done. A failure is logged as a warning, under what, and
// the next tick tries again.
func Every(ctx context.Context, interval time.Duration, log *slog.Logger, what string, f func(context.Context) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := f(ctx); err != nil && ctx.Err() == nil {
				log.WarnContext(ctx, what, "err", err)
			}
		}
	}
}

// Manual is a clock that moves only when told to. Its Now is safe for concurrent use.
type Manual struct{ ns atomic.Int64 }

// NewManual returns a manual clock showing t.
func NewManual(t time.Time) *Manual {
	c := &Manual{}
	c.ns.Store(t.UnixNano())
	return c
}

// Now returns the clock's time.
func (c *Manual) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock forward by d.
func (c *Manual) Advance(d time.Duration) { c.ns.Add(int64(d)) }
