package hostedpage_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

// Without a limit, one key could create unlimited hosted-page sessions. Sessions are counted per key
// before one is created; past the minute's quota the answer is a 429 with the rate-limit headers, and
// no session or intent is made; another key goes on, and the next minute lets the key through again.
func TestSessionsPerKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		s.m.Update(t, merchant.Update{Velocity: velocity.Limits{Sessions: 2}})
		body := map[string]any{"amount": 1000, "currency": "cad"}
		s.session(t, body)
		s.session(t, body)
		s.clock.Advance(20 * time.Second)
		r := s.do(t, "POST", sessionsPath, body)
		if r.Status != 429 || r.Str("error") != "rate_limited" {
			t.Fatalf("a third session within the minute: %d %s", r.Status, r.Raw)
		}
		r.WantRateLimit(t, "sessions", 2, 60, 40)
		if n := len(s.do(t, "GET", "/v1/payment-intents", nil).Body["data"].([]any)); n != 2 {
			t.Fatalf("%d intents; the refused session made one", n)
		}
		other := s.srv.Do(t, "POST", sessionsPath, body, checkout.HeaderAPIKey, s.key(t, checkout.AllPermissions), checkout.HeaderAccount, "acct_"+s.m.ID)
		if other.Status != 200 {
			t.Fatalf("another key: %d %s", other.Status, other.Raw)
		}
		s.clock.Advance(40 * time.Second)
		s.session(t, body)
	})
}

// The page's declines count against the key that created its session, as the key's own do: cards
// tested through a shop's page throttle the shop's page and the shop's key.
func TestPageDeclinesCountAgainstTheKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		s.m.Update(t, merchant.Update{Velocity: velocity.Limits{CredentialDeclines: 2}})
		path := strings.Replace(s.session(t, map[string]any{"amount": 1000, "currency": "cad"}).Str("url"), s.srv.URL, "", 1) + "/pay"
		for _, number := range []string{cardtest.Declined, cardtest.InsufficientFunds} {
			card := map[string]any{"type": "card", "card": map[string]any{"number": number, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}
			if r := s.srv.Do(t, "POST", path, card); r.Status != 200 || r.Str("outcome") != "failed" {
				t.Fatalf("a declined try: %d %s", r.Status, r.Raw)
			}
		}
		visa := map[string]any{"type": "card", "card": map[string]any{"number": cardtest.Visa, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}
		if r := s.srv.Do(t, "POST", path, visa); r.Status != 429 || r.Str("error") != "rate_limited" {
			t.Fatalf("a third try on the page: %d %s", r.Status, r.Raw)
		}
		pm := s.do(t, "POST", "/v1/payment-methods", map[string]any{"type": "card",
			"card": map[string]any{"number": cardtest.Visa, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}).Str("id")
		in := s.do(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1000, "currency": "cad", "payment_method": pm}).Str("id")
		if r := s.do(t, "POST", "/v1/payment-intents/"+in+"/confirm", map[string]any{}); r.Status != 429 || r.Str("error") != "rate_limited" ||
			r.Header.Get("RateLimit-Policy") != `"credential-declines";q=2;w=600` {
			t.Fatalf("the key's own confirmation after its page's declines: %d %s", r.Status, r.Raw)
		}
	})
}
