package payment_test

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"

	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/payment/paymenttest"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// BenchmarkCharge measures the ledger alone: approved sales per second from 64 goroutines calling
// Ledger.Charge with what `kassa-load`'s sale scenario sends (10.00 CAD, a Visa, an e-mail), the
// simulator answering at once, on each backend with its production durability (SQLite
// synchronous=FULL; PostgreSQL on a cluster of its own with fsync and synchronous_commit on) — no
// HTTP, no JSON, no token. It is the bound the storage puts on the API's sales (beside the HTTP-stack
// ceiling, which bounds them too), and the figure to cut the ledger's writes against. The load
// benchmark's ledger scenario (kassa-load --scenarios ledger) does the same work through the same
// paymenttest.SaleLedger, and compares it with the bare HTTP handler of the same run:
//
//	go test ./internal/payment -run '^$' -bench Charge -benchtime 50000x
func BenchmarkCharge(b *testing.B) {
	const clients = 64
	for _, backend := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.DurablePostgres}} {
		b.Run(backend.name, func(b *testing.B) {
			l, c, err := paymenttest.SaleLedger(context.Background(), backend.open(b))
			if err != nil {
				b.Fatal(err)
			}
			// The test binary's check for writes inside writes (store/nested.go), which opening the
			// database turned on, reads the goroutine's stack at every write: off, as in production.
			store.CheckNestedWrites(false)
			defer store.CheckNestedWrites(true)
			ctx := context.Background()
			var next, declined atomic.Int64
			b.ResetTimer()
			servertest.Parallel(clients, func(int) {
				for next.Add(1) <= int64(b.N) {
					sale := c
					sale.RequestID = "req-" + rand.Text()
					t, err := l.Charge(ctx, sale)
					if err != nil {
						b.Error(err)
						return
					}
					if t.Status != payment.StatusApproved {
						declined.Add(1)
					}
				}
			})
			b.StopTimer()
			if n := declined.Load(); n != 0 {
				b.Fatalf("%d of %d sales not approved", n, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sales/s")
		})
	}
}
