package payment_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A merchant's processor takes its new payments; a transaction's capture and refunds go to the account
// that took it, whatever the merchant is on by then; test_mode is the account's: false on a live one,
// true on a test account and on the simulator, which also takes every request that asks for test_mode.
func TestFollowUpsGoWhereTheOriginalWent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		kind := &processortest.Journal{}
		srv := servertest.Start(t, db, server.Config{Connectors: []processor.Kind{kind}})
		m := srv.NewMerchant(t)
		ctx := context.Background()
		use := func(kindName, config string) {
			t.Helper()
			if err := db.Write(ctx, func(tx *store.Tx) error {
				_, err := srv.Accounts().Set(ctx, tx, m.ID, kindName, []byte(config))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := srv.Accounts().Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		testMode := func(r servertest.Response, want bool) {
			t.Helper()
			if r.Bool("test_mode") != want {
				t.Fatalf("%s %s: test_mode %v, want %v", r.Str("transaction_type"), r.Str("transaction_id"), r.Bool("test_mode"), want)
			}
		}

		use("journal", `{"name":"live","test":false}`)
		liveSale := ok(t, post(t, m, "sale", card(cardtest.Visa)), "SALE", "10.00")
		testMode(liveSale, false)
		liveAuth := ok(t, post(t, m, "authorize", card(cardtest.Visa)), "AUTHORIZATION", "10.00")
		testMode(liveAuth, false)
		testMode(ok(t, post(t, m, "sale", card(cardtest.Visa, "test_mode", true)), "SALE", "10.00"), true)

		use("journal", `{"name":"sandbox","test":true}`)
		testMode(ok(t, post(t, m, "sale", card(cardtest.Visa)), "SALE", "10.00"), true)
		testMode(ok(t, post(t, m, "refund/"+liveSale.Str("transaction_id"), map[string]any{"amount": "4.00", "test_mode": true}), "REFUND", "4.00"), false)

		use("simulator", `{}`)
		testMode(ok(t, post(t, m, "capture/"+liveAuth.Str("transaction_id"), map[string]any{"amount": "10.00"}), "CAPTURE", "10.00"), false)
		testMode(ok(t, post(t, m, "sale", card(cardtest.Visa)), "SALE", "10.00"), true)

		want := []string{"live sale", "live authorize", "sandbox sale", "live refund", "live capture"}
		if got := kind.Asked(); !slices.Equal(got, want) {
			t.Fatalf("the accounts were asked %q, want %q", got, want)
		}
	})
}
