package server_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Text a database would not keep as sent — a NUL (PostgreSQL's text types cannot hold it), bytes that
// are not UTF-8 (PostgreSQL refuses them, SQLite stores them, encoding/json would silently replace
// them with U+FFFD), a lone UTF-16 surrogate — is a 400 naming its field, on the gateway API and on
// the v1 API, and nothing is stored; in a path or a query string it is a 400 too.
func TestUnstorableTextIsRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{})
		m := srv.NewMerchant(t)
		key := srv.NewAPIKey(t, "acct_"+m.ID, checkout.AllPermissions)
		v1 := []string{checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, "acct_" + m.ID}
		const card = `"card_number":"4242424242424242","card_expiry_month":"12","card_expiry_year":"40","cvv2":"123"`
		const v1Card = `"type":"card","card":{"number":"4242424242424242","exp_month":12,"exp_year":2040,"cvc":"123"}`
		for _, bad := range []struct{ name, text string }{
			{"NUL", `Ann\u0000e`}, {"invalid UTF-8", "Ann\xffe"}, {"a lone surrogate", `Ann\ud800e`}, {"a lone low surrogate", `\udc00`},
			{"a truncated UTF-8 sequence", "Ann\xc3"},
		} {
			t.Run(bad.name, func(t *testing.T) {
				for _, tc := range []struct {
					method, path, body, field string
					v1                        bool
				}{
					{"POST", "/customer-service/customer", `{"email":"a@example.com","first_name":"` + bad.text + `"}`, "first_name", false},
					{"POST", "/transaction-service/sale", `{"amount":"5.00",` + card + `,"order_id":"` + bad.text + `"}`, "order_id", false},
					{"POST", "/transaction-service/authorize", `{"amount":"5.00",` + card + `,"city":"` + bad.text + `"}`, "city", false},
					{"POST", "/plan-service/plan", `{"name":"` + bad.text + `","amount":"9.99","frequency":"MONTHLY"}`, "name", false},
					{"POST", "/v1/payment-intents", `{"amount":1000,"currency":"cad","description":"` + bad.text + `"}`, "description", true},
					{"POST", "/v1/payment-intents", `{"amount":1000,"currency":"cad","metadata":{"order":"` + bad.text + `"}}`, "metadata", true},
					{"POST", "/v1/payment-intents", `{"amount":1000,"currency":"cad","metadata":{"` + bad.text + `":"1"}}`, "metadata", true},
					{"POST", "/v1/payment-methods", `{` + v1Card + `,"billing_details":{"name":"` + bad.text + `"}}`, "billing_details.name", true},
					{"POST", "/v1/payment-methods", `{` + v1Card + `,"billing_details":{"address":{"city":"` + bad.text + `"}}}`,
						"billing_details.address.city", true},
					{"POST", "/v1/checkout/hosted-payment-page/sessions", `{"amount":1000,"currency":"cad","billing_details":{"name":"` +
						bad.text + `"}}`, "billing_details.name", true},
				} {
					var r servertest.Response
					if tc.v1 {
						r = srv.Do(t, tc.method, tc.path, tc.body, v1...)
					} else {
						r = m.Do(t, tc.method, tc.path, tc.body)
					}
					if r.Status != http.StatusBadRequest || r.Str("field") != tc.field {
						t.Errorf("%s %s: %d %s; want 400 naming %s", tc.method, tc.body, r.Status, r.Raw, tc.field)
					}
				}
				for _, table := range []string{"customers", "transactions", "plans", "payment_intents", "payment_methods", "checkout_sessions"} {
					var n int
					if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil || n != 0 {
						t.Errorf("%d rows in %s after the refusals (%v)", n, table, err)
					}
				}
			})
		}
		// The path and the query string become ids looked up and filters compared in the database: the
		// same text there is a 400 too, naming the query parameter, rather than a 500 on PostgreSQL.
		for _, tc := range []struct {
			path, field string
			v1          bool
		}{
			{"/transaction-service/transaction?first_name=Ann%00e", "first_name", false},
			{"/transaction-service/transaction?email_address=%FF", "email_address", false},
			{"/customer-service/customer/%00", "path", false},
			{"/customer-service/customer?limit=10&email=a%C3", "email", false},
			{"/plan-service/plan/%FF", "path", false},
			{"/v1/payment-intents/pi_%00", "path", true},
			{"/v1/payment-intents?starting_after=pi_%FF", "starting_after", true},
		} {
			var r servertest.Response
			if tc.v1 {
				r = srv.Do(t, "GET", tc.path, nil, v1...)
			} else {
				r = m.Do(t, "GET", tc.path, nil)
			}
			if r.Status != http.StatusBadRequest || r.Str("field") != tc.field {
				t.Errorf("GET %s: %d %s; want 400 naming %s", tc.path, r.Status, r.Raw, tc.field)
			}
		}
		// Text that is merely unusual is stored as sent: escapes, a surrogate pair, characters beyond ASCII.
		r := m.Do(t, "POST", "/customer-service/customer", `{"email":"b@example.com","first_name":"Zoë \"Z\" \ud83d\ude00 \\u0000"}`)
		if r.Status != 200 || r.Str("first_name") != "Zoë \"Z\" 😀 \\u0000" {
			t.Fatalf("a customer with unusual text: %d %s", r.Status, r.Raw)
		}
	})
}
