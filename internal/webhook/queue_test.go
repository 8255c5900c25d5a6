package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The events queued for an endpoint become its deliveries as its runner asks for them: the oldest
// first, no more than asked, each due at its event's time and made once; another endpoint's queue is
// not touched.
func TestQueuedEventsBecomeDeliveries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newFixture(t, db, Config{AllowPrivate: true})
		m := f.merchant(t, "queue@example.com")
		endpoint, _ := f.endpoint(t, m, "https://127.0.0.1:9/hooks")
		other, _ := f.endpoint(t, m, "https://127.0.0.1:9/other")
		first := f.record(t, m, 3)
		f.clock.Advance(time.Minute)
		second := f.record(t, m, 2)
		queued := func(endpoint int64) int {
			return f.count(t, `SELECT COUNT(*) FROM webhook_queue WHERE endpoint_id = $1`, endpoint)
		}
		if queued(endpoint) != 5 || queued(other) != 5 || f.count(t, `SELECT COUNT(*) FROM webhook_deliveries`) != 0 {
			t.Fatal("recording the events did not queue 5 for each endpoint, and no delivery")
		}
		for _, want := range []int{4, 1, 0} {
			n, err := f.d.promote(ctx, endpoint, 4)
			if err != nil || n != want {
				t.Fatalf("promote: %d, %v; want %d", n, err, want)
			}
		}
		if queued(endpoint) != 0 || queued(other) != 5 {
			t.Fatalf("left queued: %d of the endpoint's, %d of the other's; want 0 and 5", queued(endpoint), queued(other))
		}
		for i, id := range append(first, second...) {
			d := f.delivery(t, id)
			at := f.clock.Now().Add(-time.Minute)
			if i >= len(first) {
				at = f.clock.Now()
			}
			if d.status != "PENDING" || d.attempts != 0 || !d.nextAttempt.Equal(at) {
				t.Errorf("delivery of event %d: %+v, want pending, due at its event's time %v", i, d, at)
			}
		}
		// The oldest first: the first promotion took the three events of the first minute.
		if n := f.count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND id <= (SELECT MIN(id) + 3 FROM webhook_deliveries)
			AND next_attempt = $2`, endpoint, f.clock.Now().Add(-time.Minute).UnixMilli()); n != 3 {
			t.Errorf("%d of the first batch's deliveries are of the first minute's events, want 3", n)
		}
	})
}
