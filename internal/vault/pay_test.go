package vault_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/cardenc/cardenctest"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestPaymentsWithStoredCards(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv, m := start(t, db)
		c := createCustomer(t, m, map[string]any{"email": "ada@example.com", "first_name": "Ada", "last_name": "Lovelace",
			"city": "Toronto", "custom_id": "c-9"}).Str("lookup_id")
		empty := createCustomer(t, m, map[string]any{"email": "none@example.com"}).Str("lookup_id")
		visa := cards(addCard(t, m, c, cardBody(cardtest.Visa)))[0]["lookup_id"].(string)
		r := addCard(t, m, c, cardBody(cardtest.Mastercard))
		mc := cards(r)[1]["lookup_id"].(string)

		check := func(name string, r servertest.Response, kind, suffix, result string) {
			t.Helper()
			if r.Status != 200 || r.Str("transaction_type") != kind || r.Str("card_suffix") != suffix || r.Str("transaction_result") != result ||
				r.Str("email") != "ada@example.com" || r.Str("first_name") != "Ada" || r.Str("city") != "Toronto" || r.Str("custom_id") != "c-9" ||
				r.Str("transaction_source") != "E_COMMERCE" {
				t.Fatalf("%s: %d %s", name, r.Status, r.Raw)
			}
		}
		// The spec's shared path with an amount pays with the default card.
		check("pay with the default card", m.Do(t, "POST", "/customer-service/customer/"+c+"/card/", map[string]any{"amount": "12.50", "currency": "CAD"}),
			"SALE", "4242", "APPROVED")
		check("pay with a given card", m.Do(t, "POST", "/customer-service/customer/"+c+"/card/"+mc+"/", map[string]any{"amount": 8, "currency": "USD"}),
			"SALE", "4444", "APPROVED")
		check("sale, default card", m.Do(t, "POST", "/transaction-service/sale/customer/"+c, map[string]any{"amount": "1.00"}), "SALE", "4242", "APPROVED")
		check("sale, given card", m.Do(t, "POST", "/transaction-service/sale/customer/"+c+"/card/"+mc, map[string]any{"amount": "1.00"}), "SALE", "4444", "APPROVED")
		auth := m.Do(t, "POST", "/transaction-service/authorize/customer/"+c, map[string]any{"amount": "30.00"})
		check("authorize, default card", auth, "AUTHORIZATION", "4242", "APPROVED")
		check("authorize, given card", m.Do(t, "POST", "/transaction-service/authorize/customer/"+c+"/card/"+visa, map[string]any{"amount": "0"}),
			"AUTHORIZATION", "4242", "APPROVED")
		// Stored-card transactions are ordinary transactions: captured, refunded, listed.
		capture := m.Do(t, "POST", "/transaction-service/capture/"+auth.Num("id"), map[string]any{"amount": "30.00"})
		if capture.Status != 200 || capture.Str("transaction_result") != "APPROVED" {
			t.Fatalf("capture: %d %s", capture.Status, capture.Raw)
		}
		if refund := m.Do(t, "POST", "/transaction-service/refund/"+capture.Num("id"), map[string]any{"amount": "10.00"}); refund.Status != 200 {
			t.Fatalf("refund: %d %s", refund.Status, refund.Raw)
		}
		list := m.Do(t, "GET", "/transaction-service/transaction?email_address=ada@example.com", nil)
		if n := len(list.Body["entities"].([]any)); n != 8 {
			t.Fatalf("%d transactions listed for the customer, want 8", n)
		}

		declining := cards(addCard(t, m, c, cardBody(cardtest.InsufficientFunds)))[2]["lookup_id"].(string)
		d := m.Do(t, "POST", "/customer-service/customer/"+c+"/card/"+declining, map[string]any{"amount": "5.00"})
		check("declining card", d, "SALE", "9995", "DECLINED")

		// Idempotent like any payment: a retry replays, the processor is asked once.
		first := m.Do(t, "POST", "/transaction-service/sale/customer/"+c, map[string]any{"amount": "2.00"}, "Idempotency-Key", "stored-1")
		again := m.Do(t, "POST", "/transaction-service/sale/customer/"+c, map[string]any{"amount": "2.00"}, "Idempotency-Key", "stored-1")
		if string(first.Raw) != string(again.Raw) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %s / %s", first.Raw, again.Raw)
		}

		for _, tc := range []struct {
			name, path string
			body       map[string]any
			status     int
			field      string
		}{
			{"customer without cards", "/transaction-service/sale/customer/" + empty, map[string]any{"amount": "1.00"}, 409, ""},
			{"shared path, customer without cards", "/customer-service/customer/" + empty + "/card", map[string]any{"amount": "1.00"}, 409, ""},
			{"unknown customer", "/transaction-service/sale/customer/NOSUCHCUST", map[string]any{"amount": "1.00"}, 404, ""},
			{"unknown card", "/transaction-service/sale/customer/" + c + "/card/NOSUCHCARD", map[string]any{"amount": "1.00"}, 404, ""},
			{"another customer's card", "/customer-service/customer/" + empty + "/card/" + visa, map[string]any{"amount": "1.00"}, 404, ""},
			{"no amount", "/transaction-service/sale/customer/" + c, map[string]any{}, 400, "amount"},
			{"bad amount", "/transaction-service/sale/customer/" + c, map[string]any{"amount": "1.001"}, 400, "amount"},
			{"currency not accepted", "/transaction-service/sale/customer/" + c, map[string]any{"amount": "1.00", "currency": "EUR"}, 400, "currency"},
		} {
			if r := m.Do(t, "POST", tc.path, tc.body); r.Status != tc.status || r.Str("field") != tc.field {
				t.Errorf("%s: %d %s; want %d naming %q", tc.name, r.Status, r.Raw, tc.status, tc.field)
			}
		}

		// A card stored from a card token.
		k, err := srv.CardEncryption().Current(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		tok := cardenctest.Encrypt(t, cardenctest.Input{Key: k.Encoded(), Cards: [][4]string{{cardtest.Discover, "09", "31", "123"}}})[0]
		r = addCard(t, m, empty, map[string]any{"token": tok, "card_description": "from a token"})
		if r.Status != 200 || len(cards(r)) != 1 || cards(r)[0]["card_suffix"] != "1117" || cards(r)[0]["card_expiry"] != "09/31" {
			t.Fatalf("store a card from a token: %d %s", r.Status, r.Raw)
		}
		if r := addCard(t, m, empty, map[string]any{"token": strings.Replace(tok, "ct1.", "ct1.0", 1)}); r.Status != 400 || r.Str("error") != "invalid_card_token" {
			t.Fatalf("a bad token: %d %s", r.Status, r.Raw)
		}
	})
}

// One merchant never sees or touches another's customers and cards: every path is a 404.
func TestVaultIsolation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv, m := start(t, db)
		other := srv.NewMerchant(t)
		c := createCustomer(t, m, map[string]any{"email": "ada@example.com"}).Str("lookup_id")
		card := cards(addCard(t, m, c, cardBody(cardtest.Visa)))[0]["lookup_id"].(string)
		for _, req := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/customer-service/customer/" + c, nil},
			{"PUT", "/customer-service/customer/" + c, map[string]any{"first_name": "Eve"}},
			{"DELETE", "/customer-service/customer/" + c, nil},
			{"POST", "/customer-service/customer/" + c + "/card", cardBody(cardtest.Mastercard)},
			{"POST", "/customer-service/customer/" + c + "/card", map[string]any{"amount": "1.00"}},
			{"POST", "/customer-service/customer/" + c + "/card/" + card, map[string]any{"amount": "1.00"}},
			{"PATCH", "/customer-service/customer/" + c + "/card/" + card, map[string]any{"is_default": true}},
			{"DELETE", "/customer-service/customer/" + c + "/card/" + card, nil},
			{"POST", "/transaction-service/sale/customer/" + c, map[string]any{"amount": "1.00"}},
			{"POST", "/transaction-service/authorize/customer/" + c + "/card/" + card, map[string]any{"amount": "1.00"}},
		} {
			if r := other.Do(t, req.method, req.path, req.body); r.Status != 404 {
				t.Errorf("%s %s by another merchant: %d %s", req.method, req.path, r.Status, r.Raw)
			}
		}
		if r := other.Do(t, "GET", "/customer-service/customer", nil); len(r.Body["entities"].([]any)) != 0 {
			t.Fatalf("another merchant lists %s", r.Raw)
		}
		// Untouched for its owner.
		if r := m.Do(t, "GET", "/customer-service/customer/"+c, nil); r.Status != 200 || len(cards(r)) != 1 {
			t.Fatalf("owner: %d %s", r.Status, r.Raw)
		}
	})
}

// tokenFor encrypts one card with the script under Node, with cvv.
func tokenFor(t *testing.T, key, pan, cvv string) string {
	t.Helper()
	return cardenctest.Encrypt(t, cardenctest.Input{Key: key, Cards: [][4]string{{pan, "09", "31", cvv}}})[0]
}

// Storing a card from a token is a use of the token, which is single-use. A second store, for
// this customer or another, and a sale with the token are the same 400 as a garbage token; a token
// first used by a sale cannot store a card. A refused store (a duplicate card) does not use it.
func TestStoredCardFromATokenUsesIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv, m := start(t, db)
		k, err := srv.CardEncryption().Current(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		ada := createCustomer(t, m, map[string]any{"email": "ada@example.com"}).Str("lookup_id")
		bob := createCustomer(t, m, map[string]any{"email": "bob@example.com"}).Str("lookup_id")
		addCard(t, m, ada, cardBody(cardtest.Mastercard))
		garbage := addCard(t, m, ada, map[string]any{"token": "not a token"})
		if garbage.Status != 400 || garbage.Str("error") != "invalid_card_token" {
			t.Fatalf("garbage token: %d %s", garbage.Status, garbage.Raw)
		}
		duplicate, stored, sold := tokenFor(t, k.Encoded(), cardtest.Mastercard, "123"), tokenFor(t, k.Encoded(), cardtest.Visa, "123"),
			tokenFor(t, k.Encoded(), cardtest.Discover, "123")
		if r := addCard(t, m, ada, map[string]any{"token": duplicate}); r.Status != 409 || r.Str("error") != "duplicate_card" {
			t.Fatalf("a card stored already: %d %s", r.Status, r.Raw)
		}
		if r := addCard(t, m, bob, map[string]any{"token": duplicate}); r.Status != 200 {
			t.Fatalf("the token refused as a duplicate, for another customer: %d %s", r.Status, r.Raw)
		}
		if r := addCard(t, m, ada, map[string]any{"token": stored}); r.Status != 200 || len(cards(r)) != 2 {
			t.Fatalf("store from a token: %d %s", r.Status, r.Raw)
		}
		if r := m.Do(t, "POST", "/transaction-service/sale", map[string]any{"amount": "1.00", "token": sold}); r.Status != 200 {
			t.Fatalf("sale: %d %s", r.Status, r.Raw)
		}
		for name, r := range map[string]servertest.Response{
			"store it again":                addCard(t, m, ada, map[string]any{"token": stored}),
			"store it for another customer": addCard(t, m, bob, map[string]any{"token": stored}),
			"store a sale's token":          addCard(t, m, bob, map[string]any{"token": sold}),
			"sell with a stored card's":     m.Do(t, "POST", "/transaction-service/sale", map[string]any{"amount": "1.00", "token": stored}),
		} {
			if r.Status != 400 || string(r.Raw) != string(garbage.Raw) {
				t.Errorf("%s: %d %s; want the garbage token's %s", name, r.Status, r.Raw, garbage.Raw)
			}
		}
	})
}
