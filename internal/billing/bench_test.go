package billing_test

import (
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// BenchmarkChargeBatch measures the engine's charge batch: one run charging the day's cycle of 100
// daily subscriptions, on each backend. It is what a change to the outcome's transaction (its
// events, its receipt) must not slow down.
func BenchmarkChargeBatch(b *testing.B) {
	const subscriptions = 100
	for _, backend := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.Postgres}} {
		b.Run(backend.name, func(b *testing.B) {
			f := newFixture(b, backend.open(b), time.Date(2027, time.January, 1, 0, 0, 0, 0, time.UTC), billing.Config{})
			p := f.plan(b, map[string]any{"name": "Daily", "amount": "1.00", "frequency": "DAILY"})
			for range subscriptions {
				c, _ := f.customer(b, cardtest.Visa)
				f.subscribe(b, c, map[string]any{"plan_lookup_id": p})
			}
			f.run(b) // the first cycles, due at once
			b.ResetTimer()
			for range b.N {
				f.clock.Advance(24 * time.Hour)
				if n := f.run(b); n != subscriptions {
					b.Fatalf("%d charges, want %d", n, subscriptions)
				}
			}
			b.ReportMetric(float64(b.N*subscriptions)/b.Elapsed().Seconds(), "charges/s")
		})
	}
}
