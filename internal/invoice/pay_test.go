package invoice_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

var cardBody = map[string]any{"type": "card", "card": map[string]any{"number": cardtest.Visa, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}

// openForm follows an invoice's payment_url once: the path of the card form it redirects to, or ""
// and the page when it does not redirect.
func openForm(t *testing.T, payURL string) (string, string, int) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(payURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusSeeOther {
		loc := resp.Header.Get("Location")
		if !strings.HasPrefix(loc, "/hpp/") {
			t.Fatalf("the invoice page redirects to %q", loc)
		}
		return loc, "", resp.StatusCode
	}
	return "", string(b), resp.StatusCode
}

// sentInvoice creates and sends an invoice of 2 × 50.00 + 13% tax = 113.00 CAD to pay@example.com.
func sentInvoice(t *testing.T, m *servertest.Merchant, number string) servertest.Response {
	t.Helper()
	r := m.Do(t, "POST", base, map[string]any{"invoice_number": number, "currency": "CAD", "tax_rate": 13, "send_email": true,
		"customer_email": "pay@example.com", "customer_first_name": "Payer",
		"items": []map[string]any{{"description": "Consulting day", "quantity": 2, "unit_price": "50.00"}}})
	want(t, "create "+number, r, 200)
	if r.Str("status") != "SENT" || r.Num("total_amount") != "113.00" {
		t.Fatalf("create %s: %s", number, r.Raw)
	}
	return r
}

// charges counts the ledger's transactions of the merchant, and its approved sales of amount.
func charges(t *testing.T, db *store.DB, merchantID string) (all, approved int) {
	t.Helper()
	err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 'APPROVED' AND kind = 'SALE'
		THEN 1 ELSE 0 END), 0) FROM transactions WHERE merchant_id = $1`, merchantID).Scan(&all, &approved)
	if err != nil {
		t.Fatal(err)
	}
	return all, approved
}

// receipts are the receipts in srv's outbox of the merchant, oldest first.
func receipts(t *testing.T, srv *servertest.Server, merchantID string) []mail {
	var out []mail
	for _, e := range outbox(t, srv, merchantID) {
		if strings.HasPrefix(e.subject, "Receipt from") {
			out = append(out, e)
		}
	}
	return out
}

// Paying an invoice on the card form its payment_url opens, as the form's script posts it, on both
// backends: the form shows the merchant, the number, the lines and the total; the payment marks the
// invoice PAID with payment_info and paid_at, queues one receipt, and is the ledger's transaction; a
// second payment, on the same form or a new view of the page, charges nothing and says it is paid.
func TestPayingAnInvoice(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		m := f.m
		inv := sentInvoice(t, m, "PAY-1")
		id := inv.Str("lookup_id")
		form, _, status := openForm(t, inv.Str("payment_url"))
		if status != 303 {
			t.Fatalf("the invoice page: %d, want a redirect to the card form", status)
		}
		page, status := getPage(t, f.srv.URL+form)
		for _, w := range []string{"Test Shop", "Invoice PAY-1", "Consulting day", "2 × CA$50.00", "Tax (13%)", "CA$113.00", "card-form"} {
			if status != 200 || !strings.Contains(page, w) {
				t.Fatalf("the card form (%d) lacks %q:\n%s", status, w, page)
			}
		}

		pay := f.srv.Do(t, "POST", form+"/pay", cardBody)
		if pay.Status != 200 || pay.Str("outcome") != "completed" {
			t.Fatalf("pay: %d %s", pay.Status, pay.Raw)
		}
		txID := pay.Body["payment_intent"].(map[string]any)["latest_charge"].(string)
		got := m.Do(t, "GET", base+"/"+id, nil)
		want(t, "the paid invoice", got, 200)
		info, _ := got.Body["payment_info"].(map[string]any)
		if got.Str("status") != "PAID" || got.Body["paid_at"] == nil || info == nil || info["transaction_id"] != txID ||
			info["method"] != "card" || info["card_last4"] != "4242" || info["amount"].(interface{ String() string }).String() != "113.00" ||
			info["currency"] != "CAD" || info["date"] == nil {
			t.Fatalf("the paid invoice: %s", got.Raw)
		}
		if _, approved := charges(t, db, m.ID); approved != 1 {
			t.Fatalf("%d approved sales, want 1", approved)
		}
		var amount int64
		var email string
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT amount, COALESCE(email, '') FROM transactions WHERE transaction_id = $1`,
			txID).Scan(&amount, &email); err != nil || amount != 11300 || email != "pay@example.com" {
			t.Fatalf("the ledger's transaction %s: %d %q %v", txID, amount, email, err)
		}
		rs := receipts(t, f.srv, m.ID)
		if len(rs) != 1 || rs[0].to != "pay@example.com" || !strings.Contains(rs[0].text, "113.00") || !strings.Contains(rs[0].text, "Invoice PAY-1") {
			t.Fatalf("receipts: %+v", rs)
		}

		// Again on the same form: completed, nothing charged. The page: paid, no form.
		again := f.srv.Do(t, "POST", form+"/pay", cardBody)
		if again.Status != 200 || again.Str("outcome") != "completed" {
			t.Fatalf("pay again: %d %s", again.Status, again.Raw)
		}
		if form2, body, status := openForm(t, inv.Str("payment_url")); form2 != "" || status != 200 || !strings.Contains(body, "This invoice is paid.") {
			t.Fatalf("the paid invoice's page: %d %q\n%s", status, form2, body)
		}
		if all, _ := charges(t, db, m.ID); all != 1 || len(receipts(t, f.srv, m.ID)) != 1 {
			t.Fatalf("%d transactions, %d receipts after paying twice; want 1, 1", all, len(receipts(t, f.srv, m.ID)))
		}
		want(t, "change a paid invoice", m.Do(t, "PUT", base+"/"+id, map[string]any{"status": "CANCELLED"}), 409, "invoice_not_editable")
	})
}

// Racing payments of one invoice, through three card forms (three views of its page at once) each
// posted to twice at once, charge it once: one approved sale, one receipt, PAID.
func TestRacingInvoicePaymentsChargeOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		m := f.m
		inv := sentInvoice(t, m, "RACE-1")
		// Three views of the page at once: each gets a form, all on the one intent bound first.
		forms := make([]string, 3)
		servertest.Parallel(3, func(i int) {
			form, _, status := openForm(t, inv.Str("payment_url"))
			if status != 303 {
				t.Errorf("the invoice page: %d", status)
			}
			forms[i] = form
		})
		if t.Failed() {
			t.FailNow()
		}
		results := make([]servertest.Response, 6)
		servertest.Parallel(6, func(i int) { results[i] = f.srv.Do(t, "POST", forms[i%3]+"/pay", cardBody) })
		completed := 0
		for _, r := range results {
			switch {
			case r.Status == 200 && r.Str("outcome") == "completed":
				completed++
			case r.Status == 409:
			default:
				t.Errorf("a racing payment: %d %s", r.Status, r.Raw)
			}
		}
		if all, approved := charges(t, db, m.ID); all != 1 || approved != 1 || completed == 0 {
			t.Fatalf("%d transactions, %d approved, %d completed answers: want one charge", all, approved, completed)
		}
		if got := m.Do(t, "GET", base+"/"+inv.Str("lookup_id"), nil); got.Str("status") != "PAID" {
			t.Fatalf("after the race: %s", got.Raw)
		}
		if n := len(receipts(t, f.srv, m.ID)); n != 1 {
			t.Fatalf("%d receipts, want 1", n)
		}
	})
}

// A DRAFT is not payable until sent; a CANCELLED invoice is not payable at all, not even on a card
// form opened before it was cancelled: nothing is charged.
func TestUnpayableInvoices(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		m := f.m
		draft := m.Do(t, "POST", base, map[string]any{"currency": "CAD", "items": []map[string]any{{"description": "Thing", "unit_price": "10"}}})
		want(t, "draft", draft, 200)
		if form, body, status := openForm(t, draft.Str("payment_url")); form != "" || status != 200 || !strings.Contains(body, "not been sent") {
			t.Fatalf("a draft's page: %d %q\n%s", status, form, body)
		}

		inv := sentInvoice(t, m, "CXL-1")
		form, _, _ := openForm(t, inv.Str("payment_url"))
		want(t, "cancel", m.Do(t, "PUT", base+"/"+inv.Str("lookup_id"), map[string]any{"status": "CANCELLED"}), 200)
		if r := f.srv.Do(t, "POST", form+"/pay", cardBody); r.Str("outcome") == "completed" || (r.Status != 200 && r.Status != 409) {
			t.Fatalf("paying a cancelled invoice's open form: %d %s", r.Status, r.Raw)
		}
		if _, body, status := openForm(t, inv.Str("payment_url")); status != 200 || !strings.Contains(body, "was cancelled") {
			t.Fatalf("a cancelled invoice's page: %d\n%s", status, body)
		}
		if all, _ := charges(t, db, m.ID); all != 0 {
			t.Fatalf("%d transactions for unpayable invoices", all)
		}
	})
}

// A vault customer's invoice charged on a stored card from the API: the card must be the invoice's
// customer's (404 otherwise), the charge is idempotent under Idempotency-Key, a paid, cancelled or
// draft invoice is a 409, and another merchant's invoice a 404. One charge, one receipt.
func TestChargingAStoredCard(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		m := f.m
		customer := func(email string) (string, string) {
			c := m.Do(t, "POST", "/customer-service/customer", map[string]any{"email": email, "first_name": "Vault"})
			want(t, "customer", c, 200)
			r := m.Do(t, "POST", "/customer-service/customer/"+c.Str("lookup_id")+"/card/",
				map[string]any{"card_number": cardtest.Visa, "card_expiry_month": "12", "card_expiry_year": "40"})
			want(t, "card", r, 200)
			return c.Str("lookup_id"), r.Body["cards"].([]any)[0].(map[string]any)["lookup_id"].(string)
		}
		c1, card1 := customer("vault@example.com")
		_, card2 := customer("other@example.com")
		create := func(number string, send bool) string {
			r := m.Do(t, "POST", base, map[string]any{"invoice_number": number, "currency": "CAD", "customer_lookup_id": c1, "send_email": send,
				"items": []map[string]any{{"description": "Retainer", "unit_price": "250.00"}}})
			want(t, "create "+number, r, 200)
			return r.Str("lookup_id")
		}
		id := create("CARD-1", true)
		pay := func(id, card, key string) servertest.Response {
			return m.Do(t, "POST", base+"/"+id+"/pay", map[string]any{"card_lookup_id": card}, "Idempotency-Key", key)
		}
		want(t, "another customer's card", pay(id, card2, "k0"), 404)
		want(t, "no card", pay(id, "", "k00"), 400, "invalid_request", "card_lookup_id")
		other := f.srv.NewMerchant(t)
		want(t, "another merchant's invoice", other.Do(t, "POST", base+"/"+id+"/pay", map[string]any{"card_lookup_id": card1}), 404)

		paid := pay(id, card1, "k1")
		want(t, "pay on the stored card", paid, 200)
		info, _ := paid.Body["payment_info"].(map[string]any)
		if paid.Str("status") != "PAID" || info == nil || info["method"] != "card" || info["card_last4"] != "4242" {
			t.Fatalf("paid: %s", paid.Raw)
		}
		if again := pay(id, card1, "k1"); again.Status != 200 || again.Str("status") != "PAID" {
			t.Fatalf("the same request again: %d %s", again.Status, again.Raw)
		}
		want(t, "pay a paid invoice", pay(id, card1, "k2"), 409, "invoice_paid")
		if all, approved := charges(t, db, m.ID); all != 1 || approved != 1 || len(receipts(t, f.srv, m.ID)) != 1 {
			t.Fatalf("%d transactions, %d approved, %d receipts: want one of each", all, approved, len(receipts(t, f.srv, m.ID)))
		}

		draft := create("CARD-2", false)
		want(t, "pay a draft", pay(draft, card1, "k3"), 409, "invoice_not_sent")
		want(t, "cancel", m.Do(t, "PUT", base+"/"+draft, map[string]any{"status": "CANCELLED"}), 200)
		want(t, "pay a cancelled invoice", pay(draft, card1, "k4"), 409, "invoice_cancelled")
		if all, _ := charges(t, db, m.ID); all != 1 {
			t.Fatalf("%d transactions, want 1", all)
		}
	})
}

// A form opened before the invoice's total changed cannot charge the old total: the next view of the
// page replaces the intent, and only the new form pays, the new total.
func TestChangedInvoiceReplacesItsIntent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		m := f.m
		inv := sentInvoice(t, m, "CHG-1")
		old, _, _ := openForm(t, inv.Str("payment_url"))
		changed := m.Do(t, "PUT", base+"/"+inv.Str("lookup_id"), map[string]any{"items": []map[string]any{{"description": "Half day", "unit_price": "25.00"}}})
		want(t, "change", changed, 200)
		form, _, status := openForm(t, inv.Str("payment_url"))
		if status != 303 || form == old {
			t.Fatalf("the page after the change: %d %q", status, form)
		}
		if r := f.srv.Do(t, "POST", old+"/pay", cardBody); r.Str("outcome") == "completed" {
			t.Fatalf("the old form paid: %s", r.Raw)
		}
		if all, _ := charges(t, db, m.ID); all != 0 {
			t.Fatalf("%d transactions after paying the old form", all)
		}
		if r := f.srv.Do(t, "POST", form+"/pay", cardBody); r.Str("outcome") != "completed" {
			t.Fatalf("the new form: %d %s", r.Status, r.Raw)
		}
		got := m.Do(t, "GET", base+"/"+inv.Str("lookup_id"), nil)
		if info, _ := got.Body["payment_info"].(map[string]any); got.Str("status") != "PAID" || info == nil || info["amount"].(interface{ String() string }).String() != "28.25" {
			t.Fatalf("paid: %s", got.Raw)
		}
	})
}
