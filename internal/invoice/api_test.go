package invoice_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(browsertest.Main(m)) }

const base = "/invoice-service/invoice"

type fixture struct {
	srv *servertest.Server
	m   *servertest.Merchant
}

// newFixture starts a server with a merchant that accepts CAD, USD and JPY.
func newFixture(t *testing.T, db *store.DB) *fixture {
	t.Helper()
	srv := servertest.Start(t, db, server.Config{})
	m := srv.NewMerchant(t)
	m.Update(t, merchant.Update{Currencies: []string{"CAD", "USD", "JPY"}})
	return &fixture{srv: srv, m: m}
}

// want fails t unless r has the status, and for an error, its code and field.
func want(t *testing.T, what string, r servertest.Response, status int, codeField ...string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Raw, status)
	}
	if len(codeField) > 0 && r.Str("error") != codeField[0] {
		t.Fatalf("%s: error %q, want %q: %s", what, r.Str("error"), codeField[0], r.Raw)
	}
	if len(codeField) > 1 && r.Str("field") != codeField[1] {
		t.Fatalf("%s: field %q, want %q: %s", what, r.Str("field"), codeField[1], r.Raw)
	}
}

// fields fails t unless each numeric or string field of r has its value.
func fields(t *testing.T, what string, r servertest.Response, kv ...string) {
	t.Helper()
	for i := 0; i+1 < len(kv); i += 2 {
		got := r.Str(kv[i])
		if got == "" {
			got = r.Num(kv[i])
		}
		if got != kv[i+1] {
			t.Errorf("%s: %s = %q, want %q", what, kv[i], got, kv[i+1])
		}
	}
}

type mail struct{ to, bcc, subject, text, html string }

// outbox is the merchant's e-mails in srv's outbox, oldest first, opened.
func outbox(t *testing.T, srv *servertest.Server, merchantID string) []mail {
	t.Helper()
	var out []mail
	for _, e := range billingtest.Outbox(t, srv.DB) {
		if e.MerchantID == merchantID {
			out = append(out, mail{to: e.To, bcc: strings.Join(e.Bcc, ","), subject: e.Subject, text: e.Text, html: e.HTML})
		}
	}
	return out
}

// ids are the lookup_ids of a list's entities.
func ids(r servertest.Response) []string {
	var out []string
	es, _ := r.Body["entities"].([]any)
	for _, e := range es {
		out = append(out, e.(map[string]any)["lookup_id"].(string))
	}
	return out
}

func item(r servertest.Response, i int) map[string]any {
	return r.Body["items"].([]any)[i].(map[string]any)
}

// The life of invoices through the API on both backends: create with totals computed in CAD and
// JPY, read by lookup_id and id, list with every filter and paging, update, send through the
// outbox, the public page, cancel, delete a draft; and what another merchant sees of them: nothing.
func TestInvoiceLife(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		m := f.m
		customer := m.Do(t, "POST", "/customer-service/customer", map[string]any{"email": "ada@example.com", "first_name": "Ada",
			"last_name": "Lovelace", "city": "London"})
		want(t, "customer", customer, 200)

		// CAD: 2 × 49.99 = 99.98 (tax 12.9974 -> 13.00), 1.5 × 33.33 = 49.995 -> 50.00 (6.50),
		// 10.50 (1.365 -> 1.37); subtotal 160.48, tax 20.87, less 5.00, plus 12.50 shipping: 188.85.
		cad := m.Do(t, "POST", base, map[string]any{"invoice_number": "2026-001", "currency": "CAD", "tax_rate": 13,
			"due_date": "2030-01-31", "customer_email": "Bob@Example.com", "customer_first_name": "Bob", "notes": "Thanks",
			"terms": "Net 30", "custom_fields": map[string]string{"po": "42"}, "discount_amount": "5", "shipping_amount": 12.5,
			"items": []map[string]any{
				{"description": "Widgets", "quantity": 2, "unit_price": "49.99", "sku": "W-1"},
				{"description": "Hours", "quantity": "1.5", "unit_price": 33.33, "total_amount": "50.00", "tax_amount": "6.50"},
				{"description": "Delivery box", "unit_price": "10.50"},
			}, "subtotal_amount": "160.48", "tax_amount": 20.87, "total_amount": "188.85"})
		want(t, "create CAD", cad, 200)
		fields(t, "CAD invoice", cad, "status", "DRAFT", "invoice_number", "2026-001", "currency", "CAD", "tax_rate", "13",
			"subtotal_amount", "160.48", "tax_amount", "20.87", "discount_amount", "5.00", "shipping_amount", "12.50",
			"total_amount", "188.85", "due_date", "2030-01-31", "customer_email", "Bob@Example.com", "terms", "Net 30")
		for i, w := range [][2]string{{"99.98", "13.00"}, {"50.00", "6.50"}, {"10.50", "1.37"}} {
			if it := item(cad, i); it["total_amount"].(interface{ String() string }).String() != w[0] ||
				it["tax_amount"].(interface{ String() string }).String() != w[1] {
				t.Errorf("line %d: %v, want total %s, tax %s", i, it, w[0], w[1])
			}
		}
		if q := item(cad, 1)["quantity"].(interface{ String() string }).String(); q != "1.5" {
			t.Errorf("quantity %s, want 1.5", q)
		}
		payURL := cad.Str("payment_url")
		if !strings.HasPrefix(payURL, f.srv.URL+"/invoice/") || !strings.HasSuffix(payURL, "/pay") ||
			cad.Str("pdf_url") != strings.TrimSuffix(payURL, "/pay")+"/pdf" {
			t.Errorf("payment_url %q, pdf_url %q", payURL, cad.Str("pdf_url"))
		}
		id := cad.Str("lookup_id")

		// JPY, sent at once: 3 × ¥333 = ¥999 (tax 99.9 -> 100), ¥1505 (150.5 -> 151); ¥2504 + ¥251 − ¥100 + ¥800.
		jpy := m.Do(t, "POST", base, map[string]any{"currency": "JPY", "tax_rate": "10", "customer_lookup_id": customer.Str("lookup_id"),
			"discount_amount": 100, "shipping_amount": "800", "send_email": true,
			"items": []map[string]any{{"description": "Tea", "quantity": 3, "unit_price": 333}, {"description": "Pot", "unit_price": "1505"}}})
		want(t, "create JPY", jpy, 200)
		fields(t, "JPY invoice", jpy, "status", "SENT", "subtotal_amount", "2504", "tax_amount", "251", "total_amount", "3455",
			"customer_email", "ada@example.com", "customer_first_name", "Ada", "customer_city", "London",
			"customer_lookup_id", customer.Str("lookup_id"), "invoice_number", "INV-"+jpy.Str("lookup_id"))
		if mails := outbox(t, f.srv, m.ID); len(mails) != 1 || mails[0].to != "ada@example.com" || !strings.Contains(mails[0].text, jpy.Str("payment_url")) ||
			!strings.Contains(mails[0].text, "¥3,455") || !strings.Contains(mails[0].subject, jpy.Str("invoice_number")) {
			t.Fatalf("outbox after send_email: %+v", mails)
		}

		// Read by lookup_id and by id.
		for _, ref := range []string{id, cad.Num("id")} {
			got := m.Do(t, "GET", base+"/"+ref, nil)
			want(t, "get "+ref, got, 200)
			fields(t, "get", got, "lookup_id", id, "total_amount", "188.85")
		}
		want(t, "duplicate number", m.Do(t, "POST", base, map[string]any{"invoice_number": "2026-001",
			"items": []map[string]any{{"description": "x", "unit_price": 1}}}), 409, "invoice_number_taken")

		draft := m.Do(t, "POST", base, map[string]any{"invoice_number": "2026-003", "currency": "USD",
			"items": []map[string]any{{"description": "Small", "unit_price": "1.00"}}})
		want(t, "create USD", draft, 200)

		// Every filter of the list.
		today := time.Now().UTC().Format(time.DateOnly)
		tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
		for _, c := range []struct {
			query string
			want  []string
		}{
			{"", []string{draft.Str("lookup_id"), jpy.Str("lookup_id"), id}},
			{"status=DRAFT", []string{draft.Str("lookup_id"), id}},
			{"status=sent", []string{jpy.Str("lookup_id")}},
			{"status=PAID", nil},
			{"customer_email=bob@example.COM", []string{id}},
			{"customer_lookup_id=" + customer.Str("lookup_id"), []string{jpy.Str("lookup_id")}},
			{"invoice_number=2026-001", []string{id}},
			{"currency=jpy", []string{jpy.Str("lookup_id")}},
			{"amount_min=188.85", []string{jpy.Str("lookup_id"), id}}, // ¥3455, 188.85
			{"amount_min=188.86&amount_max=3455", []string{jpy.Str("lookup_id")}},
			{"amount_max=188.85&currency=CAD", []string{id}},
			{"amount_max=1", []string{draft.Str("lookup_id")}},
			{"amount_min=3454.5", []string{jpy.Str("lookup_id")}}, // at least ¥3455
			{"amount_max=3454.5", []string{draft.Str("lookup_id"), id}},
			{"start_date=" + today, []string{draft.Str("lookup_id"), jpy.Str("lookup_id"), id}},
			{"start_date=" + tomorrow, nil},
			{"end_date=" + today, []string{draft.Str("lookup_id"), jpy.Str("lookup_id"), id}},
			{"end_date=2020-01-01", nil},
			{"limit=2", []string{draft.Str("lookup_id"), jpy.Str("lookup_id")}},
		} {
			r := m.Do(t, "GET", base+"?"+c.query, nil)
			want(t, "list "+c.query, r, 200)
			if got := ids(r); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("list %q: %v, want %v", c.query, got, c.want)
			}
		}
		if got := ids(m.Do(t, "GET", base+"/?invoice_number=2026-001", nil)); len(got) != 1 || got[0] != id {
			t.Errorf("the list with a trailing slash: %v", got)
		}
		first := m.Do(t, "GET", base+"?limit=2", nil)
		after := first.Body["paging"].(map[string]any)["cursors"].(map[string]any)["after"].(string)
		if got := ids(m.Do(t, "GET", base+"?limit=2&after="+url.QueryEscape(after), nil)); len(got) != 1 || got[0] != id {
			t.Errorf("the next page: %v, want [%s]", got, id)
		}
		for _, q := range []string{"status=LOST", "amount_min=x", "amount_min=5&amount_max=4", "start_date=2026-13-01", "currency=XXX", "after=zz"} {
			r := m.Do(t, "GET", base+"?"+q, nil)
			name, _, _ := strings.Cut(q, "=")
			if q == "amount_min=5&amount_max=4" {
				name = "amount_max"
			}
			want(t, "list "+q, r, 400, "invalid_request", name)
		}

		// Update: new lines recompute every total; a wrong total is refused naming it.
		up := m.Do(t, "PUT", base+"/"+id, map[string]any{"items": []map[string]any{{"description": "Widgets", "quantity": 1, "unit_price": "100"}},
			"notes": "Updated"})
		want(t, "update", up, 200)
		fields(t, "updated", up, "subtotal_amount", "100.00", "tax_amount", "13.00", "total_amount", "120.50", "notes", "Updated",
			"invoice_number", "2026-001", "terms", "Net 30")
		want(t, "update with a wrong total", m.Do(t, "PUT", base+"/"+id, map[string]any{"total_amount": "120.00"}), 400, "invalid_request", "total_amount")
		want(t, "rename to a taken number", m.Do(t, "PUT", base+"/"+id, map[string]any{"invoice_number": "2026-003"}), 409, "invoice_number_taken")
		want(t, "status DRAFT to SENT by PUT", m.Do(t, "PUT", base+"/"+id, map[string]any{"status": "SENT"}), 400, "invalid_request", "status")

		// Send: the e-mail goes to the outbox with the merchant's subject and message, a copy to the merchant.
		sent := m.Do(t, "POST", base+"/"+id+"/send", map[string]any{"email": "accounts@example.com", "subject": "Your invoice",
			"message": "Hello <Bob>", "send_copy": "true"})
		want(t, "send", sent, 200)
		fields(t, "sent", sent, "status", "SENT")
		if sent.Body["sent_at"] == nil {
			t.Error("sent_at is missing")
		}
		mails := outbox(t, f.srv, m.ID)
		if len(mails) != 2 {
			t.Fatalf("%d e-mails in the outbox, want 2", len(mails))
		}
		if e := mails[1]; e.to != "accounts@example.com" || e.subject != "Your invoice" || !strings.Contains(e.bcc, "@example.com") ||
			!strings.Contains(e.text, "Hello <Bob>") || !strings.Contains(e.html, "Hello &lt;Bob&gt;") || !strings.Contains(e.text, payURL) || !strings.Contains(e.text, cad.Str("pdf_url")) || !strings.Contains(e.html, cad.Str("pdf_url")) ||
			!strings.Contains(e.text, "CA$120.50") || !strings.Contains(e.text, "Due: 2030-01-31") {
			t.Errorf("the invoice's e-mail: %+v", e)
		}
		want(t, "send to a bad address", m.Do(t, "POST", base+"/"+id+"/send", map[string]any{"email": "nobody"}), 400, "invalid_request", "email")
		want(t, "send without an address", m.Do(t, "POST", base+"/"+draft.Str("lookup_id")+"/send", nil), 400, "invalid_request", "email")

		// The public page leads to the card form, which shows the invoice; an unknown key is a 404 page.
		got, status := getPage(t, payURL)
		if status != 200 || !strings.Contains(got, "Invoice 2026-001") || !strings.Contains(got, "Test Shop") ||
			!strings.Contains(got, "CA$120.50") || !strings.Contains(got, "card-form") {
			t.Errorf("the invoice page: %d\n%s", status, got)
		}
		if _, status := getPage(t, f.srv.URL+"/invoice/NOSUCHKEY/pay"); status != 404 {
			t.Errorf("an unknown invoice page: %d", status)
		}

		// Cancel: nothing changes it after, nor sends it, nor deletes it.
		cancelled := m.Do(t, "PUT", base+"/"+id, map[string]any{"status": "CANCELLED"})
		want(t, "cancel", cancelled, 200)
		fields(t, "cancelled", cancelled, "status", "CANCELLED")
		want(t, "change a cancelled invoice", m.Do(t, "PUT", base+"/"+id, map[string]any{"notes": "x"}), 409, "invoice_not_editable")
		want(t, "send a cancelled invoice", m.Do(t, "POST", base+"/"+id+"/send", nil), 409, "invoice_not_sendable")
		want(t, "delete a cancelled invoice", m.Do(t, "DELETE", base+"/"+id, nil), 409, "invoice_not_draft")
		want(t, "delete a sent invoice", m.Do(t, "DELETE", base+"/"+jpy.Str("lookup_id"), nil), 409, "invoice_not_draft")
		if got, _ := getPage(t, payURL); !strings.Contains(got, "cancelled") {
			t.Errorf("the cancelled invoice's page:\n%s", got)
		}

		// Another merchant sees none of them.
		other := f.srv.NewMerchant(t)
		for _, call := range []struct{ method, path string }{{"GET", base + "/" + draft.Str("lookup_id")}, {"GET", base + "/" + draft.Num("id")},
			{"PUT", base + "/" + draft.Str("lookup_id")}, {"DELETE", base + "/" + draft.Str("lookup_id")}, {"POST", base + "/" + draft.Str("lookup_id") + "/send"}} {
			var body any
			if call.method != "GET" && call.method != "DELETE" {
				body = map[string]any{"notes": "mine", "email": "x@example.com"}
			}
			want(t, "another merchant's "+call.method+" "+call.path, other.Do(t, call.method, call.path, body), 404, "not_found")
		}
		if got := ids(other.Do(t, "GET", base, nil)); len(got) != 0 {
			t.Errorf("another merchant's list: %v", got)
		}
		// Its own invoice may take the same number.
		want(t, "the same number at another merchant", other.Do(t, "POST", base, map[string]any{"invoice_number": "2026-001",
			"items": []map[string]any{{"description": "x", "unit_price": 1}}}), 200)

		// Delete the draft: gone.
		del := m.Do(t, "DELETE", base+"/"+draft.Str("lookup_id"), nil)
		want(t, "delete the draft", del, 200)
		if del.Body["deleted"] != true {
			t.Errorf("delete: %s", del.Raw)
		}
		want(t, "get the deleted draft", m.Do(t, "GET", base+"/"+draft.Str("lookup_id"), nil), 404, "not_found")
	})
}

// getPage reads an HTML page.
func getPage(t *testing.T, u string) (string, int) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("%s: Content-Type %q, CSP %q", u, ct, resp.Header.Get("Content-Security-Policy"))
	}
	return string(b), resp.StatusCode
}

// What the API refuses is a 400 naming the field: amounts finer than the currency, wrong client
// totals (beyond what per-line rounding explains), and every malformed field.
func TestInvoiceRefusals(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		line := func(kv ...any) map[string]any {
			l := map[string]any{"description": "Thing", "unit_price": "10.00"}
			for i := 0; i+1 < len(kv); i += 2 {
				l[kv[i].(string)] = kv[i+1]
			}
			return l
		}
		with := func(kv ...any) map[string]any {
			b := map[string]any{"items": []map[string]any{line()}}
			for i := 0; i+1 < len(kv); i += 2 {
				b[kv[i].(string)] = kv[i+1]
			}
			return b
		}
		// Two lines of 0.05 at 10%: each line's tax 0.005 rounds to 0.01, so Kassa's tax is 0.02 where
		// the tax of the subtotal is 0.01; ⌈2 / 2⌉ = 1 cent of tolerance.
		twoLines := []map[string]any{line("unit_price", "0.05"), line("unit_price", "0.05")}
		for _, c := range []struct {
			name  string
			body  any
			field string
		}{
			{"no items", map[string]any{}, "items"},
			{"empty items", with("items", []any{}), "items"},
			{"items not an array", with("items", "x"), "items"},
			{"a line not an object", with("items", []any{"x"}), "items[0]"},
			{"a line without description", with("items", []map[string]any{{"unit_price": 1}}), "items[0].description"},
			{"a line without price", with("items", []map[string]any{line(), {"description": "x"}}), "items[1].unit_price"},
			{"cents of a cent", with("items", []map[string]any{line("unit_price", "10.999")}), "items[0].unit_price"},
			{"a fraction of a yen", with("currency", "JPY", "items", []map[string]any{line("unit_price", "10.5")}), "items[0].unit_price"},
			{"a negative price", with("items", []map[string]any{line("unit_price", -1)}), "items[0].unit_price"},
			{"a zero quantity", with("items", []map[string]any{line("quantity", 0)}), "items[0].quantity"},
			{"a quantity of 4 decimals", with("items", []map[string]any{line("quantity", "1.0001")}), "items[0].quantity"},
			{"a wrong line total", with("items", []map[string]any{line("quantity", 2, "total_amount", "21.00")}), "items[0].total_amount"},
			{"a wrong line tax", with("tax_rate", 5, "items", []map[string]any{line("tax_amount", "0.49")}), "items[0].tax_amount"},
			{"a wrong subtotal", with("subtotal_amount", "10.01"), "subtotal_amount"},
			{"a wrong total", with("shipping_amount", 1, "total_amount", "10.00"), "total_amount"},
			{"a tax beyond rounding", with("tax_rate", 10, "items", twoLines, "tax_amount", "0.04"), "tax_amount"},
			{"a total beyond rounding", with("tax_rate", 10, "items", twoLines, "total_amount", "0.10"), "total_amount"},
			{"a discount above the total", with("discount_amount", "10.00"), "discount_amount"},
			{"a tax rate above 100", with("tax_rate", "100.5"), "tax_rate"},
			{"a tax rate of 5 decimals", with("tax_rate", "8.87501"), "tax_rate"},
			{"an unknown currency", with("currency", "XXX"), "currency"},
			{"a currency not enabled", with("currency", "EUR"), "currency"},
			{"status PAID on create", with("status", "PAID"), "status"},
			{"an unknown status", with("status", "LOST"), "status"},
			{"an impossible due date", with("due_date", "2030-02-30"), "due_date"},
			{"a bad customer_email", with("customer_email", "nobody"), "customer_email"},
			{"an unknown customer", with("customer_lookup_id", "NOSUCHCUST"), "customer_lookup_id"},
			{"send_email without an address", with("send_email", true), "customer_email"},
			{"send_email not a flag", with("send_email", "yes"), "send_email"},
			{"custom_fields not an object", with("custom_fields", []string{"x"}), "custom_fields"},
			{"an empty invoice_number", with("invoice_number", " "), "invoice_number"},
			{"a NUL in notes", with("notes", "a\x00b"), "notes"},
			{"above the merchant's maximum", with("items", []map[string]any{line("quantity", 1000, "unit_price", "1000.00")}), "total_amount"},
		} {
			want(t, c.name, f.m.Do(t, "POST", base, c.body), 400, "invalid_request", c.field)
		}
		want(t, "not an object", f.m.Do(t, "POST", base, "[]"), 400, "invalid_json")

		// Within rounding: the client's tax of the subtotal is accepted, and Kassa's totals kept.
		ok := f.m.Do(t, "POST", base, with("tax_rate", 10, "items", twoLines, "tax_amount", "0.01", "total_amount", "0.11"))
		want(t, "a tax within rounding", ok, 200)
		fields(t, "within rounding", ok, "subtotal_amount", "0.10", "tax_amount", "0.02", "total_amount", "0.12")

		// A change of currency needs the lines again, in the new currency's decimals.
		id := ok.Str("lookup_id")
		want(t, "currency without items", f.m.Do(t, "PUT", base+"/"+id, map[string]any{"currency": "JPY"}), 400, "invalid_request", "items")
		yen := f.m.Do(t, "PUT", base+"/"+id, map[string]any{"currency": "JPY", "items": []map[string]any{line("unit_price", 500)}})
		want(t, "currency with items", yen, 200)
		fields(t, "in yen", yen, "currency", "JPY", "subtotal_amount", "500", "tax_amount", "50", "total_amount", "550")
		want(t, "unknown invoice", f.m.Do(t, "PUT", base+"/NOSUCHINVO", map[string]any{"notes": "x"}), 404, "not_found")
	})
}

// Without the invoice scope every route of the service is a 403 insufficient_scope: for a merchant's
// token asked with ecom alone, and for a partner's token that the merchant approved without invoice.
// A partner approved for invoice alone reaches it.
func TestInvoiceScope(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		created := f.m.Do(t, "POST", base, map[string]any{"items": []map[string]any{{"description": "x", "unit_price": 1}}})
		want(t, "create", created, 200)
		id := created.Str("lookup_id")
		cfg := clientcredentials.Config{ClientID: f.m.Creds.ClientID, ClientSecret: f.m.Creds.ClientSecret,
			TokenURL: f.srv.URL + "/oauth/token", Scopes: []string{"ecom"}}
		tok, err := cfg.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		p := f.srv.NewPartner(t)
		ecomOnly := f.srv.PartnerTokens(t, p, f.m.ID, auth.ScopeEcom)
		for name, access := range map[string]string{"merchant token with ecom": tok.AccessToken, "partner token with ecom": ecomOnly.Str("access_token")} {
			for _, call := range []struct {
				method, path string
				body         any
			}{
				{"POST", base, map[string]any{"items": []map[string]any{{"description": "x", "unit_price": 1}}}},
				{"GET", base, nil}, {"GET", base + "/" + id, nil}, {"PUT", base + "/" + id, map[string]any{"notes": "x"}},
				{"DELETE", base + "/" + id, nil}, {"POST", base + "/" + id + "/send", map[string]any{"email": "a@example.com"}},
			} {
				r := f.srv.Do(t, call.method, call.path, call.body, "Authorization", "Bearer "+access)
				want(t, name+": "+call.method+" "+call.path, r, 403, "insufficient_scope")
				if !strings.Contains(r.Header.Get("WWW-Authenticate"), `scope="invoice"`) {
					t.Errorf("%s: WWW-Authenticate %q", name, r.Header.Get("WWW-Authenticate"))
				}
			}
		}
		want(t, "no token", f.srv.Do(t, "GET", base, nil), 401, "invalid_token")
		invoiceOnly := f.srv.PartnerTokens(t, f.srv.NewPartner(t), f.m.ID, auth.ScopeInvoice)
		r := f.srv.Do(t, "GET", base+"/"+id, nil, "Authorization", "Bearer "+invoiceOnly.Str("access_token"))
		want(t, "partner token with invoice", r, 200)
		want(t, "partner token with invoice, a sale", f.srv.Do(t, "GET", "/plan-service/plan", nil, "Authorization",
			"Bearer "+invoiceOnly.Str("access_token")), 403, "insufficient_scope")
	})
}

// A cancellation racing sends: every request either succeeds or is a 409, each e-mail queued belongs
// to a send that succeeded, and a send never lands after the cancellation (the invoice ends CANCELLED).
func TestInvoiceCancelRacingSend(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		inv := f.m.Do(t, "POST", base, map[string]any{"customer_email": "bob@example.com",
			"items": []map[string]any{{"description": "x", "unit_price": 1}}})
		want(t, "create", inv, 200)
		path := base + "/" + inv.Str("lookup_id")
		results := make([]servertest.Response, 8)
		servertest.Parallel(len(results), func(i int) {
			if i == 0 {
				results[i] = f.m.Do(t, "PUT", path, map[string]any{"status": "CANCELLED"})
			} else {
				results[i] = f.m.Do(t, "POST", path+"/send", nil)
			}
		})
		sends := 0
		for i, r := range results {
			switch {
			case r.Status == 200 && i > 0:
				sends++
			case r.Status == 200:
			case r.Status == 409 && i == 0 && r.Str("error") == "concurrent_update":
				// The cancellation lost to a send: cancel again, as its Retry-After says.
				want(t, "cancel again", f.m.Do(t, "PUT", path, map[string]any{"status": "CANCELLED"}), 200)
			case r.Status == 409 && (r.Str("error") == "concurrent_update" || r.Str("error") == "invoice_not_sendable"):
			default:
				t.Fatalf("request %d: %d %s", i, r.Status, r.Raw)
			}
		}
		if got := f.m.Do(t, "GET", path, nil); got.Str("status") != "CANCELLED" {
			t.Fatalf("after the race: %s", got.Raw)
		}
		if n := len(outbox(t, f.srv, f.m.ID)); n != sends {
			t.Fatalf("%d e-mails queued for %d sends that succeeded", n, sends)
		}
	})
}
