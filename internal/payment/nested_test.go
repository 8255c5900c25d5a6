package payment_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// reserving is a processor whose Prepare writes to the database on every call, as the ISO 8583
// connector does each time it runs out of its block of trace numbers: once in a thousand operations,
// so that the suite never met it (ce63c15).
type reserving struct {
	processor.Processor
	db *store.DB
}

func (p *reserving) Prepare(ctx context.Context, _ processor.Merchant) (string, error) {
	var n int64
	err := p.db.QueryRow(ctx, []any{&n}, `INSERT INTO iso8583_series (name, reserved) VALUES ('nested-test', 1)
		ON CONFLICT (name) DO UPDATE SET reserved = iso8583_series.reserved + 1 RETURNING reserved`)
	return fmt.Sprintf("trace-%d", n), err
}

// Every kind of operation prepares its trace before the write that records its attempt: a Prepare
// that writes would otherwise begin a write inside that write, which on SQLite waits for itself (the
// store's check turns it into a panic in tests, and a 500 here).
func TestPrepareThatWritesIsNotInsideTheAttemptsWrite(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		proc := &reserving{Processor: simulator.New(simulator.Config{}), db: db}
		srv := servertest.Start(t, db, server.Config{Processor: proc, ProcessorTimeout: 10 * time.Second, KEK: servertest.NewKEK(t)})
		m := srv.NewMerchant(t)

		sale := ok(t, post(t, m, "sale", card(cardtest.Visa, "amount", "30.00")), "SALE", "30.00")
		ok(t, post(t, m, "sale", card(cardtest.Visa, "amount", "5.00"), "Idempotency-Key", "order-1"), "SALE", "5.00")
		ok(t, post(t, m, "refund/"+sale.Num("id"), map[string]any{"amount": "10.00"}), "REFUND", "10.00")
		auth := ok(t, post(t, m, "authorize", card(cardtest.Visa, "amount", "20.00")), "AUTHORIZATION", "20.00")
		ok(t, post(t, m, "capture/"+auth.Num("id"), map[string]any{"amount": "20.00"}), "CAPTURE", "20.00")
		auth = ok(t, post(t, m, "authorize", card(cardtest.Visa, "amount", "7.00")), "AUTHORIZATION", "7.00")
		ok(t, post(t, m, "void/"+auth.Num("id"), nil), "VOID", "7.00")

		var reserved int64
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT reserved FROM iso8583_series WHERE name = 'nested-test'`).Scan(&reserved); err != nil {
			t.Fatal(err)
		}
		if reserved != 7 {
			t.Fatalf("Prepare was called %d times for 7 operations", reserved)
		}
	})
}
