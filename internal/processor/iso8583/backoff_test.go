package iso8583

import (
	"testing"
	"time"
)

// TestBackoff: the wait doubles per failed attempt up to ReconnectMax, and is drawn between its half
// and its whole.
func TestBackoff(t *testing.T) {
	t.Parallel()
	h := &host{cfg: KindConfig{ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second}}
	for failures, d := range map[int]time.Duration{0: 100 * time.Millisecond, 1: 200 * time.Millisecond, 3: 800 * time.Millisecond,
		4: time.Second, 60: time.Second} {
		seen := map[time.Duration]bool{}
		for range 200 {
			w := h.backoff(failures)
			if w < d/2 || w > d {
				t.Fatalf("backoff(%d) = %s, want between %s and %s", failures, w, d/2, d)
			}
			seen[w] = true
		}
		if len(seen) < 100 {
			t.Errorf("backoff(%d) drew %d distinct waits in 200: no jitter", failures, len(seen))
		}
	}
}
