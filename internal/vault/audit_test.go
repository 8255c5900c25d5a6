package vault_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Creating a customer or storing a card with an Idempotency-Key is safe to retry: the retry replays
// the first answer and stores nothing twice; the key on another body is a 422.
func TestVaultWritesAreIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		_, m := start(t, db)
		body := map[string]any{"email": "ada@example.com"}
		first := m.Do(t, "POST", "/customer-service/customer", body, "Idempotency-Key", "cust-1")
		again := m.Do(t, "POST", "/customer-service/customer", body, "Idempotency-Key", "cust-1")
		if first.Status != 200 || string(again.Raw) != string(first.Raw) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retried create: %d %s / %d %s", first.Status, first.Raw, again.Status, again.Raw)
		}
		if r := m.Do(t, "POST", "/customer-service/customer", map[string]any{"email": "bob@example.com"}, "Idempotency-Key", "cust-1"); r.Status != 422 {
			t.Fatalf("the key on another body: %d %s", r.Status, r.Raw)
		}
		path := "/customer-service/customer/" + first.Str("lookup_id") + "/card"
		card := map[string]any{"card_number": cardtest.Visa, "card_expiry_month": "12", "card_expiry_year": "2099"}
		a := m.Do(t, "POST", path, card, "Idempotency-Key", "card-1")
		b := m.Do(t, "POST", path, card, "Idempotency-Key", "card-1")
		if a.Status != 200 || string(b.Raw) != string(a.Raw) || len(cards(a)) != 1 {
			t.Fatalf("retried card: %d %s / %d %s", a.Status, a.Raw, b.Status, b.Raw)
		}
		if list := m.Do(t, "GET", "/customer-service/customer", nil); len(list.Body["entities"].([]any)) != 1 {
			t.Fatalf("customers after retries: %s", list.Raw)
		}
		if got := m.Do(t, "GET", "/customer-service/customer/"+first.Str("lookup_id"), nil); len(cards(got)) != 1 {
			t.Fatalf("cards after retries: %s", got.Raw)
		}
	})
}

// Every change to the vault leaves an audit record in the same database transaction: which
// operation, on which record, by which client and request, when; never card data. A refused change
// leaves none.
func TestVaultChangesAreAudited(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		_, m := start(t, db)
		c := createCustomer(t, m, map[string]any{"email": "ada@example.com"}).Str("lookup_id")
		base := "/customer-service/customer/" + c
		add := func(pan string) string {
			r := m.Do(t, "POST", base+"/card", map[string]any{"card_number": pan, "card_expiry_month": "12", "card_expiry_year": "2099"})
			cs := cards(r)
			return cs[len(cs)-1]["lookup_id"].(string)
		}
		visa, mc := add(cardtest.Visa), add(cardtest.Mastercard)
		m.Do(t, "POST", base+"/card", map[string]any{"card_number": cardtest.Visa, "card_expiry_month": "12", "card_expiry_year": "2099"}) // 409
		m.Do(t, "PUT", base, map[string]any{"city": "Toronto"})
		m.Do(t, "PATCH", base+"/card/"+mc, map[string]any{"is_default": true})
		m.Do(t, "DELETE", base+"/card/"+visa, nil)
		m.Do(t, "DELETE", base, nil)

		rows, err := db.Reader().QueryContext(context.Background(), `SELECT merchant_id, COALESCE(client_id, ''), operation,
			COALESCE(resource, ''), outcome, detail, COALESCE(request_id, ''), created_at FROM audit_log ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var merchantID, clientID, op, resource, outcome, detail, rid string
			var at int64
			if err := rows.Scan(&merchantID, &clientID, &op, &resource, &outcome, &detail, &rid, &at); err != nil {
				t.Fatal(err)
			}
			if merchantID != m.ID || clientID != m.Creds.ClientID || rid == "" || at == 0 || outcome != "DONE" {
				t.Errorf("audit row lacks who, what or when: %s %s %s %s %s %d", merchantID, clientID, op, resource, rid, at)
			}
			cardtest.Check(t, "the audit log", strings.Join([]string{op, resource, detail}, " "))
			got = append(got, op+" "+resource)
		}
		card := func(l string) string { return "customer/" + c + "/card/" + l }
		want := []string{"customer.create customer/" + c, "card.add " + card(visa), "card.add " + card(mc),
			"customer.update customer/" + c, "card.update " + card(mc), "card.delete " + card(visa), "customer.delete customer/" + c}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
