package checkout_test

import (
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

// confirm pays the intent id with a new payment method of the card number.
func (a *account) confirm(t *testing.T, id, number string) servertest.Response {
	t.Helper()
	return a.do(t, "POST", "/v1/payment-intents/"+id+"/confirm", map[string]any{"payment_method": a.method(t, number)})
}

// lastError is the code of an intent's last_payment_error.
func lastError(r servertest.Response) string {
	e, _ := r.Body["last_payment_error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// Without a limit, one v1 intent took 30 declined confirmations in 2.5 s. Failed confirmations per
// payment intent are limited per hour: past them, the intent's confirmation is a 429 until the hour
// since its first failure ends; other intents go on.
func TestIntentFailuresPerHour(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now().Truncate(time.Millisecond))
		a := newAccount(t, start(t, db, server.Config{Now: clk.Now}))
		a.m.Update(t, merchant.Update{Velocity: velocity.Limits{IntentFailures: 2}})
		id := a.intent(t, map[string]any{"amount": 1000, "currency": "cad"}).Str("id")
		for _, number := range []string{cardtest.Declined, cardtest.InsufficientFunds} {
			if r := a.confirm(t, id, number); r.Status != 200 || r.Str("status") != "requires_payment_method" || lastError(r) == "" {
				t.Fatalf("a declined confirmation: %d %s", r.Status, r.Raw)
			}
		}
		clk.Advance(10 * time.Minute)
		r := a.confirm(t, id, cardtest.Visa)
		wantError(t, r, 429, "rate_limited", "")
		r.WantRateLimit(t, "intent-failures", 2, 3600, 3000)
		if got := a.ok(t, "GET", "/v1/payment-intents/"+id, nil); got.Str("status") != "requires_payment_method" || got.Body["payment_method"] != nil {
			t.Fatalf("the refused confirmation changed the intent: %s", got.Raw)
		}
		other := a.intent(t, map[string]any{"amount": 1000, "currency": "cad"}).Str("id")
		if r := a.confirm(t, other, cardtest.Visa); r.Str("status") != "succeeded" {
			t.Fatalf("another intent: %d %s", r.Status, r.Raw)
		}
		clk.Advance(50 * time.Minute)
		if r := a.confirm(t, id, cardtest.Visa); r.Str("status") != "succeeded" {
			t.Fatalf("after the hour: %d %s", r.Status, r.Raw)
		}
	})
}

// The card's limit holds on the v1 API too: past it, the confirmation is declined with
// card_velocity_exceeded in last_payment_error, without the processor, and with the rate-limit headers.
func TestCardDeclinesOnConfirmation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		a := newAccount(t, start(t, db, server.Config{}))
		a.m.Update(t, merchant.Update{Velocity: velocity.Limits{CardDeclines: 1}})
		first := a.intent(t, map[string]any{"amount": 1000, "currency": "cad"}).Str("id")
		if r := a.confirm(t, first, cardtest.Declined); lastError(r) != "card_declined" {
			t.Fatalf("first decline: %s", r.Raw)
		}
		second := a.intent(t, map[string]any{"amount": 1000, "currency": "cad"}).Str("id")
		r := a.confirm(t, second, cardtest.Declined)
		e, _ := r.Body["last_payment_error"].(map[string]any)
		if r.Status != 200 || r.Str("status") != "requires_payment_method" || e["code"] != "card_velocity_exceeded" ||
			e["decline_code"] != "card_velocity_exceeded" {
			t.Fatalf("past the card's declines: %d %s", r.Status, r.Raw)
		}
		r.WantRateLimit(t, "card-declines", 1, 3600, 3600)
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE decline_code = 'card_velocity_exceeded' AND processor_ref IS NULL`); n != 1 {
			t.Fatalf("%d ledger transactions declined without the processor; want 1", n)
		}
	})
}

// Every v1 route is behind its key's request rate, after the key check.
func TestRequestRatePerKey(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Now())
	srv := start(t, storetest.SQLite(t), server.Config{Now: clk.Now})
	a := newAccount(t, srv)
	a.m.Update(t, merchant.Update{Velocity: velocity.Limits{RequestRate: 2}})
	a.ok(t, "GET", "/v1/payment-intents", nil)
	a.ok(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1000, "currency": "cad"})
	r := a.do(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1000, "currency": "cad"}, "Idempotency-Key", "order-7")
	wantError(t, r, 429, "rate_limited", "")
	r.WantRateLimit(t, "requests", 2, 1, 1)
	wantError(t, srv.Do(t, "GET", "/v1/payment-intents", nil, checkout.HeaderAPIKey, "kk_wrong", checkout.HeaderAccount, a.id), 401, "invalid_api_key", "")
	other := createKey(t, srv, a.id, checkout.PaymentIntentsRead)
	if r := srv.Do(t, "GET", "/v1/payment-intents", nil, checkout.HeaderAPIKey, other.Key, checkout.HeaderAccount, a.id); r.Status != 200 {
		t.Fatalf("another key is throttled too: %d %s", r.Status, r.Raw)
	}
	clk.Advance(time.Second)
	if r := a.do(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1000, "currency": "cad"}, "Idempotency-Key", "order-7"); r.Status != 200 ||
		r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the retry a second later: %d %s", r.Status, r.Raw)
	}
}
