package payment_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cardpkg "github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

// BenchmarkCharge measures the ledger alone: approved sales per second from 64 goroutines calling
// Ledger.Charge with what `kassa-load`'s sale scenario sends (10.00 CAD, a Visa, an e-mail), the
// simulator answering at once, on each backend with its production durability (SQLite
// synchronous=FULL; PostgreSQL on a cluster of its own with fsync and synchronous_commit on) — no
// HTTP, no JSON, no token. It is the bound the storage puts on the API's sales (beside the HTTP-stack
// ceiling, which bounds them too), and the figure to cut the ledger's writes against:
//
//	go test ./internal/payment -run '^$' -bench Charge -benchtime 50000x
func BenchmarkCharge(b *testing.B) {
	const clients = 64
	for _, backend := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.DurablePostgres}} {
		b.Run(backend.name, func(b *testing.B) {
			l, c := benchLedger(b, backend.open(b))
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

// benchLedger is a ledger on db taking sales through the simulator for a merchant of its own, and the
// sale the load generator's clients ask for.
func benchLedger(b *testing.B, db *store.DB) (*payment.Ledger, payment.Charge) {
	b.Helper()
	ctx := context.Background()
	kek, err := envelope.ParseKEK(envelope.NewKEKText())
	if err != nil {
		b.Fatal(err)
	}
	ring, err := envelope.NewKeyring(ctx, db, kek, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	limits, err := velocity.New(ctx, velocity.Config{DB: db, Keyring: ring, Now: time.Now})
	if err != nil {
		b.Fatal(err)
	}
	var m merchant.Merchant
	if err := db.Write(ctx, func(tx *store.Tx) error {
		m, err = merchant.Create(ctx, tx, merchant.New{Name: "Bench", Email: strings.ToLower(rand.Text()) + "@example.com"}, time.Now())
		return err
	}); err != nil {
		b.Fatal(err)
	}
	sim := processor.Account{Kind: "simulator", Test: true, Processor: simulator.New(simulator.Config{})}
	l := payment.New(payment.Config{DB: db, Processors: processortest.OneAccount{Acct: sim}, Velocity: limits})
	number, err := cardpkg.ParseNumber(cardtest.Visa)
	if err != nil {
		b.Fatal(err)
	}
	expiry, err := cardpkg.ParseExpiry("12", "30")
	if err != nil {
		b.Fatal(err)
	}
	cad, _ := money.Lookup("CAD")
	return l, payment.Charge{Actor: payment.Actor{MerchantID: m.ID, ClientID: fmt.Sprintf("%032x", 1)},
		Kind: payment.KindSale, Amount: 1000, Currency: cad, Card: number, Expiry: expiry, CVV: "123",
		Customer: payment.Customer{Email: "load@example.com"}, Source: payment.SourceEcommerce}
}
