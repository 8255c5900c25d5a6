package payment_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

// wantRateLimited fails t unless r is a 429 rate_limited with the headers of policy.
func wantRateLimited(t *testing.T, r servertest.Response, policy string, quota, window, seconds int) {
	t.Helper()
	if r.Status != 429 || r.Str("error") != "rate_limited" || r.Str("message") == "" {
		t.Fatalf("want 429 rate_limited, got %d %s", r.Status, r.Raw)
	}
	r.WantRateLimit(t, policy, quota, window, seconds)
}

// wantDecline fails t unless r is a declined transaction with the decline code.
func wantDecline(t *testing.T, r servertest.Response, code string) {
	t.Helper()
	if r.Status != 200 || r.Str("transaction_result") != "DECLINED" || r.Str("decline_code") != code {
		t.Fatalf("want a decline %s, got %d %s", code, r.Status, r.Raw)
	}
}

// Declines per card (by its keyed fingerprint) per hour, answered by a decline
// card_velocity_exceeded that never reaches the processor. The decline after the quota is one, in
// the merchant's list, with the rate-limit headers; other cards, and the card at another merchant,
// go on; the end of the hour lets the card through again.
func TestCardDeclinesPerHour(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		f.m.Update(t, merchant.Update{Velocity: velocity.Limits{CardDeclines: 3}})
		for range 3 {
			wantDecline(t, post(t, f.m, "sale", card(cardtest.Declined)), "card_declined")
			f.clock.Advance(5 * time.Minute)
		}
		calls := f.proc.calls.Load()
		f.clock.Advance(5 * time.Minute)
		r := post(t, f.m, "sale", card(cardtest.Declined))
		wantDecline(t, r, "card_velocity_exceeded")
		r.WantRateLimit(t, "card-declines", 3, 3600, 2400)
		if !strings.Contains(r.Str("transaction_message"), "declined 3 times within an hour") {
			t.Errorf("transaction_message %q", r.Str("transaction_message"))
		}
		wantDecline(t, post(t, f.m, "authorize", card(cardtest.Declined, "amount", "0")), "card_velocity_exceeded")
		if n := f.proc.calls.Load(); n != calls {
			t.Fatalf("the processor was called %d times for a card past its declines", n-calls)
		}
		// The merchant sees it in its list, as every decline.
		list := f.m.Do(t, "GET", "/transaction-service/transaction?transaction_status=DECLINED", nil)
		if got := ids(t, list); len(got) != 5 || got[1] != r.Num("id") {
			t.Fatalf("declined transactions %v; want 5 with %s", got, r.Num("id"))
		}
		// Another card goes on, and the same card at another merchant, whose limit is the default.
		if r := post(t, f.m, "sale", card(cardtest.Visa)); r.Str("transaction_result") != "APPROVED" {
			t.Fatalf("another card: %s", r.Raw)
		}
		other := f.srv.NewMerchant(t)
		for range velocity.Defaults.CardDeclines {
			wantDecline(t, post(t, other, "sale", card(cardtest.Declined)), "card_declined")
		}
		wantDecline(t, post(t, other, "sale", card(cardtest.Declined)), "card_velocity_exceeded")
		// The hour since the first decline ends.
		f.clock.Advance(40 * time.Minute)
		calls = f.proc.calls.Load()
		wantDecline(t, post(t, f.m, "sale", card(cardtest.Declined)), "card_declined")
		if f.proc.calls.Load() != calls+1 {
			t.Fatal("after the hour the card does not reach the processor")
		}
	})
}

// Declines per credential per 10 minutes, answered by 429 rate_limited. Processing errors
// do not count; a credential past its declines may still refund; another credential of the merchant
// goes on; a refused request leaves its Idempotency-Key free for the retry.
func TestCredentialDeclinesPer10Minutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		f.m.Update(t, merchant.Update{Velocity: velocity.Limits{CredentialDeclines: 3}})
		sale := post(t, f.m, "sale", card(cardtest.Visa))
		wantDecline(t, post(t, f.m, "sale", card(cardtest.ProcessingError)), "processing_error")
		wantDecline(t, post(t, f.m, "sale", card(cardtest.Declined)), "card_declined")
		wantDecline(t, post(t, f.m, "sale", card(cardtest.InsufficientFunds)), "insufficient_funds")
		if r := post(t, f.m, "sale", card(cardtest.Visa)); r.Str("transaction_result") != "APPROVED" {
			t.Fatalf("after two declines (and a processing error) of 3: %s", r.Raw)
		}
		wantDecline(t, post(t, f.m, "authorize", card(cardtest.LostCard)), "lost_card")
		calls := f.proc.calls.Load()
		f.clock.Advance(time.Minute)
		r := f.m.Do(t, "POST", "/transaction-service/sale", card(cardtest.Visa), "Idempotency-Key", "order-1")
		wantRateLimited(t, r, "credential-declines", 3, 600, 540)
		wantRateLimited(t, f.m.Do(t, "POST", "/transaction-service/authorize", card(cardtest.Visa)), "credential-declines", 3, 600, 540)
		if f.proc.calls.Load() != calls {
			t.Fatal("a refused payment reached the processor")
		}
		if r := post(t, f.m, "refund/"+sale.Num("id"), map[string]any{"amount": "1.00"}); r.Str("transaction_result") != "APPROVED" {
			t.Fatalf("a refund by the throttled credential: %s", r.Raw)
		}
		if r := post(t, f.m.NewClient(t), "sale", card(cardtest.Visa)); r.Str("transaction_result") != "APPROVED" {
			t.Fatalf("another credential of the merchant: %s", r.Raw)
		}
		f.clock.Advance(9 * time.Minute)
		r = f.m.Do(t, "POST", "/transaction-service/sale", card(cardtest.Visa), "Idempotency-Key", "order-1")
		if r.Status != 200 || r.Str("transaction_result") != "APPROVED" || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the retry after the window: %d %s (replayed %q)", r.Status, r.Raw, r.Header.Get("Idempotent-Replayed"))
		}
	})
}

// A request rate per credential (a token bucket), in front of every authenticated route of
// the gateway API, before idempotency.
func TestRequestRatePerCredential(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	f.m.Update(t, merchant.Update{Velocity: velocity.Limits{RequestRate: 3}})
	for range 3 {
		if r := f.m.Do(t, "GET", "/transaction-service/transaction", nil); r.Status != 200 {
			t.Fatalf("within the rate: %d %s", r.Status, r.Raw)
		}
	}
	wantRateLimited(t, f.m.Do(t, "POST", "/transaction-service/sale", card(cardtest.Visa)), "requests", 3, 1, 1)
	wantRateLimited(t, f.m.Do(t, "GET", "/customer-service/customer", nil), "requests", 3, 1, 1)
	if f.proc.calls.Load() != 0 {
		t.Fatal("a refused sale reached the processor")
	}
	if r := f.m.NewClient(t).Do(t, "GET", "/transaction-service/transaction", nil); r.Status != 200 {
		t.Fatalf("another credential: %d", r.Status)
	}
	f.clock.Advance(time.Second)
	if r := post(t, f.m, "sale", card(cardtest.Visa)); r.Str("transaction_result") != "APPROVED" {
		t.Fatalf("a second later: %s", r.Raw)
	}
}

// Two servers over one PostgreSQL database share the card's count: the node that did not count the
// declines learns of them at its own next decline, so the cluster lets through one decline more than
// the quota, and no more.
func TestCardDeclinesAcrossNodes(t *testing.T) {
	t.Parallel()
	db := storetest.Postgres(t)
	clk := clock.NewManual(time.Now().Truncate(time.Millisecond))
	proc := &counting{Processor: simulator.New(simulator.Config{Now: clk.Now})}
	kek := servertest.NewKEK(t)
	one := servertest.Start(t, db, server.Config{Processor: proc, Now: clk.Now, KEK: kek})
	two := servertest.Start(t, db, server.Config{Processor: proc, Now: clk.Now, KEK: kek})
	m := one.NewMerchant(t)
	m.Update(t, merchant.Update{Velocity: velocity.Limits{CardDeclines: 3}})
	on := func(s *servertest.Server) servertest.Response {
		return s.Do(t, "POST", "/transaction-service/sale", card(cardtest.Declined), "Authorization", "Bearer "+m.Token)
	}
	for range 3 {
		wantDecline(t, on(one), "card_declined")
	}
	wantDecline(t, on(one), "card_velocity_exceeded")
	wantDecline(t, on(two), "card_declined") // two's own first count tells it
	wantDecline(t, on(two), "card_velocity_exceeded")
	wantDecline(t, on(one), "card_velocity_exceeded")
	if n := proc.calls.Load(); n != 4 {
		t.Fatalf("the processor saw %d declines of a card whose quota is 3 on two nodes; want 4", n)
	}
}
