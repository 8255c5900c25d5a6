package clock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
)

func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs cardtest.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		var calls atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			clock.Every(ctx, time.Minute, log, "tick", func(context.Context) error {
				if calls.Add(1) == 2 {
					return errors.New("boom")
				}
				return nil
			})
			close(done)
		}()
		time.Sleep(3*time.Minute + time.Second)
		cancel()
		<-done
		if calls.Load() != 3 {
			t.Fatalf("%d calls in 3 minutes, want 3", calls.Load())
		}
		if !strings.Contains(logs.String(), "tick") || !strings.Contains(logs.String(), "boom") {
			t.Fatalf("the failure was not logged: %s", logs.String())
		}
	})
}

func TestManual(t *testing.T) {
	start := time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)
	c := clock.NewManual(start)
	c.Advance(36 * time.Hour)
	if got := c.Now(); !got.Equal(start.Add(36 * time.Hour)) {
		t.Fatalf("Now = %v", got)
	}
}
