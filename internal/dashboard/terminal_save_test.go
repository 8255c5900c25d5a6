package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/vault"
)

// payFrame submits the hosted card form that a dashboard page frames (body) with the card number, as
// the form's script does, and checks that the payment completed.
func payFrame(t *testing.T, s *shop, body, number string) {
	t.Helper()
	m := framePath.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no card form in the page:\n%s", body)
	}
	r := s.srv.Do(t, "POST", m[1]+"/pay", map[string]any{"type": "card",
		"card": map[string]any{"number": number, "exp_month": 12, "exp_year": time.Now().Year() + 2, "cvc": "123"}})
	if r.Status != http.StatusOK || r.Str("outcome") != "completed" {
		t.Fatalf("the card form's payment: %d %s", r.Status, r.Raw)
	}
}

// nonces are the per-response nonces of a page, which differ between two answers alike.
var nonces = regexp.MustCompile(`nonce="[^"]*"`)

// Sales staff, who may not change customers, save the terminal's card only to a new customer: the
// form offers no existing customer, and a POST that asks for one is refused before any customer is
// looked up, with one answer (status and page) whether the customer named exists or not. Saving to a
// new customer with an existing customer's e-mail is not refused either.
//
// Owners and admins save to an existing customer, found by e-mail or id; the card becomes its
// default only when they tick "make it the customer's default card", which the form offers unticked:
// unticked, the customer's default stays the card it was; ticked, the new card takes it over. A value
// of the box other than the form's is refused naming it.
func TestTerminalSavesToCustomersByRole(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		ctx := context.Background()
		n, _ := card.ParseNumber(cardtest.Mastercard)
		grace, _, err := s.srv.Vault().SaveCard(ctx, s.merchantID, vault.SaveTo{New: &vault.Details{Email: "grace@example.com"}}, n,
			card.Expiry{Month: 12, Year: time.Now().Year() + 2})
		if err != nil {
			t.Fatal(err)
		}
		order := func(csrf string, more url.Values) url.Values {
			f := url.Values{"csrf_token": {csrf}, "kind": {"SALE"}, "currency": {"CAD"}, "amount": {"10.00"}}
			for k, v := range more {
				f[k] = v
			}
			return f
		}

		sales := s.browser(t)
		csrf := sales.signIn("sales@maple.example")
		resp, body := sales.get("/dashboard/terminal")
		wantStatus(t, "sales opens the terminal", resp, body, http.StatusOK)
		for _, offer := range []string{`id="save-existing"`, `name="customer"`, `name="make_default"`} {
			if strings.Contains(body, offer) {
				t.Errorf("sales' terminal offers %s", offer)
			}
		}
		var first string
		for _, named := range []string{"grace@example.com", "GRACE@example.com", grace.LookupID, "nobody@example.com", "cus_nobody"} {
			resp, body := sales.post("/dashboard/terminal", order(csrf, url.Values{"save": {"existing"}, "customer": {named}, "make_default": {"yes"}}))
			wantStatus(t, "sales saves to the existing customer "+named, resp, body, http.StatusForbidden)
			if !strings.Contains(body, `id="save-error"`) || !strings.Contains(body, "only to a new customer") || strings.Contains(body, "/hpp/") {
				t.Fatalf("sales' refusal for %s does not say why next to the choice, or made a card form:\n%s", named, body)
			}
			if body = nonces.ReplaceAllString(body, ""); first == "" {
				first = body
			} else if body != first {
				t.Fatalf("sales' refusal for %s differs from the first one's: it tells which customers exist", named)
			}
		}
		resp, body = sales.post("/dashboard/terminal", order(csrf, url.Values{"save": {"new"}, "email": {"grace@example.com"}}))
		wantStatus(t, "sales saves to a new customer with an existing customer's e-mail", resp, body, http.StatusOK)
		if !framePath.MatchString(body) {
			t.Fatalf("no card form for a new customer:\n%s", body)
		}

		admin := s.browser(t)
		csrf = admin.signIn("admin@maple.example")
		resp, body = admin.get("/dashboard/terminal")
		if !strings.Contains(body, `id="save-existing"`) || !regexp.MustCompile(`<input type="checkbox" id="make_default" name="make_default" value="yes">`).MatchString(body) {
			t.Fatalf("the admin's terminal lacks the existing customer or the unticked default box:\n%s", body)
		}
		resp, body = admin.post("/dashboard/terminal", order(csrf, url.Values{"save": {"existing"}, "customer": {grace.LookupID}, "make_default": {"on"}}))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="make_default-error"`) || strings.Contains(body, "/hpp/") {
			t.Fatalf("a default box of another value: %d, want 400 naming make_default\n%s", resp.StatusCode, body)
		}
		resp, body = admin.post("/dashboard/terminal", order(csrf, url.Values{"save": {"existing"}, "customer": {"nobody@example.com"}}))
		wantStatus(t, "the admin names a customer who does not exist", resp, body, http.StatusNotFound)

		resp, body = admin.post("/dashboard/terminal", order(csrf, url.Values{"save": {"existing"}, "customer": {"grace@example.com"}}))
		wantStatus(t, "the admin saves to grace, not as the default", resp, body, http.StatusOK)
		payFrame(t, s, body, cardtest.Visa)
		c, err := s.srv.Vault().Get(ctx, s.merchantID, grace.LookupID)
		if err != nil || len(c.Cards) != 2 || c.Cards[1].Suffix != "4242" || c.Cards[1].IsDefault || !c.Cards[0].IsDefault {
			t.Fatalf("grace's cards after a save not asked to be the default: %+v, %v", c.Cards, err)
		}

		owner := s.browser(t)
		csrf = owner.signIn("owner@maple.example")
		resp, body = owner.post("/dashboard/terminal", order(csrf, url.Values{"save": {"existing"}, "customer": {grace.LookupID}, "make_default": {"yes"}}))
		wantStatus(t, "the owner saves to grace as the default", resp, body, http.StatusOK)
		payFrame(t, s, body, cardtest.Discover)
		c, err = s.srv.Vault().Get(ctx, s.merchantID, grace.LookupID)
		if err != nil || len(c.Cards) != 3 || c.Cards[2].Suffix != "1117" || !c.Cards[2].IsDefault || c.Cards[0].IsDefault || c.Cards[1].IsDefault {
			t.Fatalf("grace's cards after a save asked to be the default: %+v, %v", c.Cards, err)
		}
	})
}
