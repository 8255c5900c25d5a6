package checkout_test

import (
	"context"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// BenchmarkCreateConfirm measures what a payment intent's changes cost: an intent created with its
// payment method, then confirmed (the ledger's sale approved by the simulator), through the service
// without HTTP, one at a time, on each backend. The payment methods are made before the timer
// starts. Compare two builds interleaved:
//
//	go test ./internal/checkout -run '^$' -bench CreateConfirm -benchtime 300x -count 1
func BenchmarkCreateConfirm(b *testing.B) {
	for _, backend := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.Postgres}} {
		b.Run(backend.name, func(b *testing.B) {
			db := backend.open(b)
			srv := servertest.Start(b, db, server.Config{})
			m := srv.NewMerchant(b)
			account := "acct_" + m.ID
			hdr := []string{checkout.HeaderAPIKey, srv.NewAPIKey(b, account, checkout.AllPermissions).Key, checkout.HeaderAccount, account}
			methods := make([]string, b.N)
			for i := range methods {
				r := srv.Do(b, "POST", "/v1/payment-methods", cardBody(cardtest.Visa), hdr...)
				if r.Status != 200 {
					b.Fatalf("payment method: %d %s", r.Status, r.Raw)
				}
				methods[i] = r.Str("id")
			}
			mm, err := merchant.Get(context.Background(), db.Reader(), m.ID)
			if err != nil {
				b.Fatal(err)
			}
			who := checkout.Who{Merchant: mm, ClientID: "bench"}
			cad, _ := money.Lookup("CAD")
			store.CheckNestedWrites(false) // as in production (see BenchmarkCharge)
			defer store.CheckNestedWrites(true)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				in, err := srv.Checkout().Create(ctx, who, checkout.IntentParams{Amount: 1000, Currency: cad,
					CaptureMethod: checkout.CaptureAutomatic, PaymentMethod: methods[i]})
				if err != nil {
					b.Fatal(err)
				}
				if in, err = srv.Checkout().Confirm(ctx, who, in.IntentID, checkout.ConfirmParams{Source: payment.SourceEcommerce}); err != nil ||
					in.Status != checkout.StatusSucceeded {
					b.Fatalf("confirm: %v %s", err, in.Status)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "intents/s")
		})
	}
}
