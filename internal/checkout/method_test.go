package checkout_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// POST /v1/payment-methods stores a card as pm_…; GET shows brand, last four digits and expiry, never
// more; another account's payment method is not found.
func TestPaymentMethods(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a, b := newAccount(t, srv), newAccount(t, srv)
		body := map[string]any{"type": "card",
			"card": map[string]any{"number": "3782 822463 10005", "exp_month": 7, "exp_year": 41, "cvc": "8831"},
			"billing_details": map[string]any{"name": "Ada Lovelace", "email": "ada@example.com", "phone": "+1 555 0100",
				"address": map[string]any{"line1": "1 Main St", "line2": "Unit 2", "city": "Toronto", "state": "ON", "postal_code": "M5V 2T6", "country": "ca"}}}
		created := a.ok(t, "POST", "/v1/payment-methods", body)
		id := created.Str("id")
		if !strings.HasPrefix(id, "pm_") || created.Str("object") != "payment_method" || created.Str("type") != "card" || created.Num("created") == "" {
			t.Fatalf("created %s", created.Raw)
		}
		c := created.Body["card"].(map[string]any)
		if c["brand"] != "amex" || c["last4"] != "0005" || c["exp_month"].(interface{ String() string }).String() != "7" ||
			c["exp_year"].(interface{ String() string }).String() != "2041" || len(c) != 4 {
			t.Fatalf("card %v", c)
		}
		bd := created.Body["billing_details"].(map[string]any)
		addr := bd["address"].(map[string]any)
		if bd["name"] != "Ada Lovelace" || bd["email"] != "ada@example.com" || bd["phone"] != "+1 555 0100" || addr["country"] != "CA" ||
			addr["postal_code"] != "M5V 2T6" || addr["line2"] != "Unit 2" {
			t.Fatalf("billing details %v", bd)
		}
		got := a.ok(t, "GET", "/v1/payment-methods/"+id, nil)
		if string(got.Raw) != string(created.Raw) {
			t.Fatalf("get %s\nwant %s", got.Raw, created.Raw)
		}
		for _, leak := range []string{"378282", "82246", "8831"} {
			if strings.Contains(string(got.Raw), leak) {
				t.Fatalf("the payment method shows %q: %s", leak, got.Raw)
			}
		}
		wantError(t, b.do(t, "GET", "/v1/payment-methods/"+id, nil), 404, "not_found", "")
		wantError(t, a.do(t, "GET", "/v1/payment-methods/pm_NOSUCHMETHOD", nil), 404, "not_found", "")
		// Without billing details, every one of them is null.
		bare := a.ok(t, "POST", "/v1/payment-methods", cardBody(cardtest.Visa))
		if string(bare.Raw) == "" || !strings.Contains(string(bare.Raw), `"billing_details":{"name":null,"email":null,"phone":null,"address":{"line1":null,"line2":null,"city":null,"state":null,"postal_code":null,"country":null}}`) {
			t.Fatalf("bare %s", bare.Raw)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM audit_log WHERE operation = 'payment_method.create' AND resource = $1 AND client_id = $2`,
			"payment_method/"+id, a.keyID); n != 1 {
			t.Fatalf("%d audit records of the creation", n)
		}
	})
}

// Every rule of a payment method is a 400 naming its field.
func TestPaymentMethodValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		card := func(change map[string]any) map[string]any {
			c := map[string]any{"number": cardtest.Visa, "exp_month": 12, "exp_year": 2040, "cvc": "123"}
			for k, v := range change {
				if v == nil {
					delete(c, k)
				} else {
					c[k] = v
				}
			}
			return map[string]any{"type": "card", "card": c}
		}
		billing := func(bd map[string]any) map[string]any {
			b := card(nil)
			b["billing_details"] = bd
			return b
		}
		now := time.Now().UTC()
		for _, tc := range []struct {
			name  string
			body  any
			code  string
			field string
		}{
			{"no type", map[string]any{"card": card(nil)["card"]}, "invalid_request", "type"},
			{"not a card", map[string]any{"type": "sepa_debit", "card": card(nil)["card"]}, "invalid_request", "type"},
			{"no card", map[string]any{"type": "card"}, "invalid_request", "card"},
			{"card not an object", map[string]any{"type": "card", "card": cardtest.Visa}, "invalid_request", "card"},
			{"no number", card(map[string]any{"number": nil}), "invalid_request", "card.number"},
			{"number as a JSON number", card(map[string]any{"number": 4242424242424242}), "invalid_request", "card.number"},
			{"Luhn", card(map[string]any{"number": "4242424242424241"}), "invalid_request", "card.number"},
			{"letters", card(map[string]any{"number": "4242x24242424242"}), "invalid_request", "card.number"},
			{"too short", card(map[string]any{"number": "42424242"}), "invalid_request", "card.number"},
			{"no month", card(map[string]any{"exp_month": nil}), "invalid_request", "card.exp_month"},
			{"month 13", card(map[string]any{"exp_month": 13}), "invalid_request", "card.exp_month"},
			{"month 0", card(map[string]any{"exp_month": 0}), "invalid_request", "card.exp_month"},
			{"month as a string", card(map[string]any{"exp_month": "12"}), "invalid_request", "card.exp_month"},
			{"no year", card(map[string]any{"exp_year": nil}), "invalid_request", "card.exp_year"},
			{"year 1999", card(map[string]any{"exp_year": 1999}), "invalid_request", "card.exp_year"},
			{"year as a fraction", card(map[string]any{"exp_year": 2040.5}), "invalid_request", "card.exp_year"},
			{"expired last year", card(map[string]any{"exp_year": now.Year() - 1}), "invalid_request", "card.exp_year"},
			{"cvc of 4 on a Visa", card(map[string]any{"cvc": "1234"}), "invalid_request", "card.cvc"},
			{"cvc of 3 on an Amex", card(map[string]any{"number": cardtest.Amex, "cvc": "123"}), "invalid_request", "card.cvc"},
			{"cvc letters", card(map[string]any{"cvc": "12a"}), "invalid_request", "card.cvc"},
			{"cvc as a number", card(map[string]any{"cvc": 123}), "invalid_request", "card.cvc"},
			{"unknown card field", card(map[string]any{"cvv": "123"}), "unknown_field", "card.cvv"},
			{"unknown field", map[string]any{"type": "card", "card": card(nil)["card"], "customer": "cus_1"}, "unknown_field", "customer"},
			{"billing e-mail", billing(map[string]any{"email": "nope"}), "invalid_request", "billing_details.email"},
			{"billing name too long", billing(map[string]any{"name": strings.Repeat("n", 201)}), "invalid_request", "billing_details.name"},
			{"billing name with a control character", billing(map[string]any{"name": "Ada\x00"}), "invalid_request", "billing_details.name"},
			{"billing country", billing(map[string]any{"address": map[string]any{"country": "CAN"}}), "invalid_request", "billing_details.address.country"},
			{"billing country digits", billing(map[string]any{"address": map[string]any{"country": "C1"}}), "invalid_request", "billing_details.address.country"},
			{"billing postal code", billing(map[string]any{"address": map[string]any{"postal_code": strings.Repeat("9", 21)}}), "invalid_request", "billing_details.address.postal_code"},
			{"billing zip too long", billing(map[string]any{"address": map[string]any{"zip": strings.Repeat("9", 21)}}), "invalid_request", "billing_details.address.zip"},
			{"billing zip and postal code differ", billing(map[string]any{"address": map[string]any{"zip": "90210", "postal_code": "90211"}}),
				"invalid_request", "billing_details.address.postal_code"},
			{"billing unknown", billing(map[string]any{"company": "x"}), "unknown_field", "billing_details.company"},
			{"billing city as a number", billing(map[string]any{"address": map[string]any{"city": 5}}), "invalid_request", "billing_details.address.city"},
			{"malformed JSON", `{"type": "card",`, "invalid_json", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantError(t, a.do(t, "POST", "/v1/payment-methods", tc.body), 400, tc.code, tc.field)
			})
		}
		if now.Month() > 1 {
			wantError(t, a.do(t, "POST", "/v1/payment-methods", card(map[string]any{"exp_month": int(now.Month()) - 1, "exp_year": now.Year()})),
				400, "invalid_request", "card.exp_month")
		}
		// This month is still good, and a two-digit year is this century's.
		a.ok(t, "POST", "/v1/payment-methods", card(map[string]any{"exp_month": int(now.Month()), "exp_year": now.Year() % 100}))
		if n := count(t, db, `SELECT COUNT(*) FROM payment_methods`); n != 1 {
			t.Fatalf("%d payment methods stored, want the one valid", n)
		}
	})
}

// A payment method not attached within 15 minutes expires: a confirmation cannot use it, and the sweep
// deletes its sealed number. One that a confirmation used loses its number with the outcome.
func TestPaymentMethodExpiry(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		srv := start(t, db, server.Config{Now: clk.Now})
		a := newAccount(t, srv)
		late := a.method(t, cardtest.Visa)
		early := a.method(t, cardtest.Mastercard)
		// An intent may name a method; naming it does not attach it.
		named := a.intent(t, map[string]any{"amount": 500, "currency": "cad", "payment_method": late})
		if named.Str("status") != "requires_confirmation" {
			t.Fatalf("created %s", named.Raw)
		}
		clk.Advance(14*time.Minute + 59*time.Second)
		used := a.intent(t, map[string]any{"amount": 700, "currency": "cad"})
		if r := a.ok(t, "POST", "/v1/payment-intents/"+used.Str("id")+"/confirm", map[string]any{"payment_method_id": early}); r.Str("status") != "succeeded" {
			t.Fatalf("confirm within 15 minutes: %s", r.Raw)
		}
		sealed := func(id string) int {
			return count(t, db, `SELECT COUNT(*) FROM payment_methods WHERE pm_id = $1 AND pan IS NOT NULL`, id)
		}
		if sealed(early) != 0 {
			t.Fatal("the used payment method still holds its number")
		}
		clk.Advance(time.Second)
		r := a.do(t, "POST", "/v1/payment-intents/"+named.Str("id")+"/confirm", nil)
		wantError(t, r, 400, "payment_method_expired", "payment_method")
		if i := a.ok(t, "GET", "/v1/payment-intents/"+named.Str("id"), nil); i.Str("status") != "requires_confirmation" {
			t.Fatalf("after the refused confirmation: %s", i.Raw)
		}
		// The same intent can be paid with a new method.
		fresh := a.method(t, cardtest.Visa2)
		if r := a.ok(t, "POST", "/v1/payment-intents/"+named.Str("id")+"/confirm", map[string]any{"payment_method_id": fresh}); r.Str("status") != "succeeded" {
			t.Fatalf("confirm with a fresh method: %s", r.Raw)
		}
		if sealed(late) != 1 {
			t.Fatal("the expired method lost its number before the sweep")
		}
		if err := srv.Checkout().Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		if sealed(late) != 0 {
			t.Fatal("the sweep left the expired method's number")
		}
		// What the method showed stays.
		if m := a.ok(t, "GET", "/v1/payment-methods/"+late, nil); m.Body["card"].(map[string]any)["last4"] != "4242" {
			t.Fatalf("expired method %s", m.Raw)
		}
	})
}

// A payment method's billing address takes its postal code as postal_code or as zip (the hosted-page
// session's name), or both when they agree; the answer spells it postal_code.
func TestPaymentMethodZip(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		for _, addr := range []map[string]any{
			{"zip": "90210"}, {"postal_code": "90210"}, {"zip": "90210", "postal_code": "90210"},
		} {
			body := cardBody(cardtest.Visa)
			body["billing_details"] = map[string]any{"address": addr}
			r := a.ok(t, "POST", "/v1/payment-methods", body)
			got := r.Body["billing_details"].(map[string]any)["address"].(map[string]any)
			if got["postal_code"] != "90210" || got["zip"] != nil {
				t.Fatalf("%v: %s", addr, r.Raw)
			}
		}
	})
}
