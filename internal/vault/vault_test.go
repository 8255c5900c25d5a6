package vault_test

import (
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

func start(t *testing.T, db *store.DB) (*servertest.Server, *servertest.Merchant) {
	t.Helper()
	srv := servertest.Start(t, db, server.Config{})
	return srv, srv.NewMerchant(t)
}

func createCustomer(t *testing.T, m *servertest.Merchant, body map[string]any) servertest.Response {
	t.Helper()
	r := m.Do(t, "POST", "/customer-service/customer", body)
	if r.Status != 200 {
		t.Fatalf("create customer: %d %s", r.Status, r.Raw)
	}
	return r
}

func cards(r servertest.Response) []map[string]any {
	var out []map[string]any
	for _, c := range r.Body["cards"].([]any) {
		out = append(out, c.(map[string]any))
	}
	return out
}

// defaults lists the suffixes of the default cards.
func defaults(r servertest.Response) []string {
	var out []string
	for _, c := range cards(r) {
		if c["is_default"] == true {
			out = append(out, c["card_suffix"].(string))
		}
	}
	return out
}

var lookupID = regexp.MustCompile(`^[A-Za-z0-9]{10}$`)

func TestCustomers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		_, m := start(t, db)
		full := map[string]any{"email": "ada@example.com", "first_name": "Ada", "last_name": "Lovelace", "company": "Engines",
			"bcc_emails": "books@example.com, boss@example.com", "telephone": "+1 555 0100", "address1": "1 Main St",
			"address2": "Unit 2", "city": "Toronto", "province": "ON", "country": "CA", "postal_code": "M5V 2T6", "custom_id": "c-9"}
		c := createCustomer(t, m, full)
		if !lookupID.MatchString(c.Str("lookup_id")) || c.Num("id") == "" || len(cards(c)) != 0 ||
			len(c.Body["subscriptions"].([]any)) != 0 || c.Str("bcc_emails") != "books@example.com,boss@example.com" {
			t.Fatalf("created %s", c.Raw)
		}
		for k, v := range full {
			if k != "bcc_emails" && c.Str(k) != v {
				t.Errorf("%s = %q, want %q", k, c.Str(k), v)
			}
		}
		path := "/customer-service/customer/" + c.Str("lookup_id")
		if g := m.Do(t, "GET", path, nil); g.Status != 200 || string(g.Raw) != string(c.Raw) {
			t.Fatalf("get: %d %s", g.Status, g.Raw)
		}
		// PUT is a partial update: absent fields keep their values.
		u := m.Do(t, "PUT", path, map[string]any{"city": "Montréal", "telephone": ""})
		if u.Status != 200 || u.Str("city") != "Montréal" || u.Str("telephone") != "" || u.Str("first_name") != "Ada" || u.Str("email") != "ada@example.com" {
			t.Fatalf("update: %d %s", u.Status, u.Raw)
		}
		for _, tc := range []struct {
			method string
			body   map[string]any
			field  string
		}{
			{"POST", map[string]any{"first_name": "No Email"}, "email"},
			{"POST", map[string]any{"email": "not-an-address"}, "email"},
			{"POST", map[string]any{"email": "a@example.com", "first_name": strings.Repeat("x", 101)}, "first_name"},
			{"POST", map[string]any{"email": "a@example.com", "postal_code": strings.Repeat("1", 21)}, "postal_code"},
			{"POST", map[string]any{"email": "a@example.com", "bcc_emails": "ok@example.com, nope"}, "bcc_emails"},
			{"POST", map[string]any{"email": "a@example.com", "company": map[string]any{}}, "company"},
			{"PUT", map[string]any{"email": ""}, "email"},
			{"PUT", map[string]any{"custom_id": strings.Repeat("x", 101)}, "custom_id"},
		} {
			p := "/customer-service/customer"
			if tc.method == "PUT" {
				p = path
			}
			if r := m.Do(t, tc.method, p, tc.body); r.Status != 400 || r.Str("field") != tc.field {
				t.Errorf("%s %v: %d %s; want 400 naming %s", tc.method, tc.body, r.Status, r.Raw, tc.field)
			}
		}
		if d := m.Do(t, "DELETE", path, nil); d.Status != 200 || d.Body["deleted"] != true {
			t.Fatalf("delete: %d %s", d.Status, d.Raw)
		}
		if g := m.Do(t, "GET", path, nil); g.Status != 404 {
			t.Fatalf("get after delete: %d", g.Status)
		}
	})
}

func TestListCustomers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		_, m := start(t, db)
		var ids []string
		for _, c := range []map[string]any{
			{"email": "a@example.com", "first_name": "Ada", "company": "Engines"},
			{"email": "b@example.com", "first_name": "Bob", "last_name": "Byte"},
			{"email": "c@example.com", "first_name": "ada", "company": "engines"},
		} {
			ids = append(ids, createCustomer(t, m, c).Str("lookup_id"))
		}
		list := func(q string) []string {
			r := m.Do(t, "GET", "/customer-service/customer?"+q, nil)
			if r.Status != 200 {
				t.Fatalf("list?%s: %d %s", q, r.Status, r.Raw)
			}
			var out []string
			for _, e := range r.Body["entities"].([]any) {
				out = append(out, e.(map[string]any)["lookup_id"].(string))
			}
			return out
		}
		eq := func(q string, want ...string) {
			t.Helper()
			if got := list(q); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("list?%s = %v, want %v", q, got, want)
			}
		}
		eq("", ids[2], ids[1], ids[0])
		eq("first_name=ADA", ids[2], ids[0])
		eq("company=Engines&first_name=Ada", ids[2], ids[0])
		eq("email_address=B@example.com", ids[1])
		eq("last_name=byte", ids[1])
		page := m.Do(t, "GET", "/customer-service/customer?limit=2", nil)
		after := page.Body["paging"].(map[string]any)["cursors"].(map[string]any)["after"].(string)
		eq("limit=2&after="+after, ids[0])
		for _, q := range []string{"limit=0", "limit=10001", "after=bogus"} {
			if r := m.Do(t, "GET", "/customer-service/customer?"+q, nil); r.Status != 400 {
				t.Errorf("list?%s: %d", q, r.Status)
			}
		}
	})
}

func addCard(t *testing.T, m *servertest.Merchant, customer string, body map[string]any) servertest.Response {
	t.Helper()
	return m.Do(t, "POST", "/customer-service/customer/"+customer+"/card/", body)
}

func cardBody(pan string, extra ...any) map[string]any {
	b := map[string]any{"card_number": pan, "card_expiry_month": "12", "card_expiry_year": "30"}
	for i := 0; i+1 < len(extra); i += 2 {
		b[extra[i].(string)] = extra[i+1]
	}
	return b
}

func TestStoredCards(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		_, m := start(t, db)
		c := createCustomer(t, m, map[string]any{"email": "ada@example.com"}).Str("lookup_id")
		r := addCard(t, m, c, cardBody(cardtest.Visa, "cvv2", "123", "card_description", "personal"))
		if r.Status != 200 || len(cards(r)) != 1 {
			t.Fatalf("add card: %d %s", r.Status, r.Raw)
		}
		first := cards(r)[0]
		if first["is_default"] != true || first["card_expiry"] != "12/30" || first["card_prefix"] != "4242" || first["card_suffix"] != "4242" ||
			first["card_type"] != "VISA" || first["card_description"] != "personal" || !lookupID.MatchString(first["lookup_id"].(string)) {
			t.Fatalf("first card: %v", first)
		}
		r = addCard(t, m, c, cardBody(cardtest.Mastercard))
		if got := defaults(r); len(cards(r)) != 2 || len(got) != 1 || got[0] != "4242" {
			t.Fatalf("second card took the default: %s", r.Raw)
		}
		r = addCard(t, m, c, cardBody(cardtest.Amex, "is_default", true))
		if got := defaults(r); len(got) != 1 || got[0] != "0005" {
			t.Fatalf("a card stored with is_default: defaults %v", got)
		}
		if dup := addCard(t, m, c, cardBody(cardtest.Visa, "card_expiry_year", "2031")); dup.Status != 409 || dup.Str("error") != "duplicate_card" {
			t.Fatalf("the same number again: %d %s", dup.Status, dup.Raw)
		}
		mc := cards(r)[1]["lookup_id"].(string)
		r = m.Do(t, "PATCH", "/customer-service/customer/"+c+"/card/"+mc, map[string]any{"is_default": "true", "card_description": "work",
			"card_expiry_month": 3, "card_expiry_year": 2032})
		if got := defaults(r); r.Status != 200 || len(got) != 1 || got[0] != "4444" || cards(r)[1]["card_description"] != "work" ||
			cards(r)[1]["card_expiry"] != "03/32" {
			t.Fatalf("patch: %d %s", r.Status, r.Raw)
		}
		// Deleting the default promotes the most recently added remaining card (the Amex).
		r = m.Do(t, "DELETE", "/customer-service/customer/"+c+"/card/"+mc, nil)
		if got := defaults(r); r.Status != 200 || len(cards(r)) != 2 || len(got) != 1 || got[0] != "0005" {
			t.Fatalf("delete the default: %d %s", r.Status, r.Raw)
		}
		last := time.Now().AddDate(0, -1, 0)
		for _, tc := range []struct {
			name  string
			body  map[string]any
			field string
		}{
			{"Luhn", cardBody("4242424242424241"), "card_number"},
			{"month", cardBody(cardtest.Discover, "card_expiry_month", "13"), "card_expiry_month"},
			{"past expiry", cardBody(cardtest.Discover, "card_expiry_month", int(last.Month()), "card_expiry_year", last.Year()), "card_expiry_year"},
			{"bad CVV", cardBody(cardtest.Discover, "cvv2", "12"), "cvv2"},
			{"no number", map[string]any{"card_number": "", "card_expiry_month": "12"}, "card_number"},
			{"description too long", cardBody(cardtest.Discover, "card_description", strings.Repeat("x", 201)), "card_description"},
			{"token and number", cardBody(cardtest.Discover, "token", "ct1.x"), "card_number"},
			{"nothing to do", map[string]any{"card_description": "x"}, "card_number"},
		} {
			if r := addCard(t, m, c, tc.body); r.Status != 400 || r.Str("field") != tc.field {
				t.Errorf("%s: %d %s; want 400 naming %s", tc.name, r.Status, r.Raw, tc.field)
			}
		}
		if r := m.Do(t, "PATCH", "/customer-service/customer/"+c+"/card/"+mc, map[string]any{"card_description": "x"}); r.Status != 404 {
			t.Fatalf("patch a deleted card: %d", r.Status)
		}
	})
}

// Concurrent requests cannot break the rules: one card number once per customer, one default.
func TestStoredCardRulesUnderConcurrency(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		_, m := start(t, db)
		c := createCustomer(t, m, map[string]any{"email": "ada@example.com"}).Str("lookup_id")
		var stored atomic.Int64
		servertest.Parallel(10, func(int) {
			switch r := addCard(t, m, c, cardBody(cardtest.Visa)); r.Status {
			case 200:
				stored.Add(1)
			case 409:
			default:
				t.Errorf("add: %d %s", r.Status, r.Raw)
			}
		})
		if stored.Load() != 1 {
			t.Fatalf("the same card stored %d times", stored.Load())
		}
		pans := []string{cardtest.Mastercard, cardtest.Amex, cardtest.Discover, "3566002020360505", "36227206271667", "6200000000000005"}
		servertest.Parallel(len(pans), func(i int) {
			if r := addCard(t, m, c, cardBody(pans[i], "is_default", true)); r.Status != 200 {
				t.Errorf("add %d: %d %s", i, r.Status, r.Raw)
			}
		})
		r := m.Do(t, "GET", "/customer-service/customer/"+c, nil)
		if len(cards(r)) != 7 || len(defaults(r)) != 1 {
			t.Fatalf("%d cards, defaults %v", len(cards(r)), defaults(r))
		}
	})
}
