package hostedpage_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// receiptOf is the receipt section of a page, "" for none.
func receiptOf(body string) string {
	return regexp.MustCompile(`(?s)<section class="receipt".*?</section>`).FindString(body)
}

// Once its payment completed, the page at the session's URL shows the receipt: merchant, amount, the
// card's brand and last four digits only, the date, the reference (the charge's transaction id), and
// the test-mode badge of a test payment. A shop's session sends no receipt, so the page says none was
// sent. Past billing.ReceiptWindow the receipt keeps the merchant, amount, date and reference, not the
// card. Without the session's URL there is no receipt: another token is a 404.
func TestHostedPageReceipt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		u := s.session(t, map[string]any{"amount": 1999, "currency": "cad"}).Str("url")
		if r := receiptOf(mustPage(t, u)); r != "" {
			t.Fatalf("an open session shows a receipt: %s", r)
		}
		r := s.srv.Do(t, "POST", strings.Replace(u, s.srv.URL, "", 1)+"/pay",
			map[string]any{"type": "card", "card": map[string]any{"number": cardtest.Visa, "exp_month": 12, "exp_year": 2040, "cvc": "123"}})
		if r.Status != 200 || r.Str("outcome") != "completed" {
			t.Fatalf("pay: %d %s", r.Status, r.Raw)
		}
		pi, _ := r.Body["payment_intent"].(map[string]any)
		charge, _ := pi["latest_charge"].(string)
		body := mustPage(t, u)
		rec := receiptOf(body)
		name := regexp.MustCompile(`<h1>(.+?)</h1>`).FindStringSubmatch(body)
		if name == nil {
			t.Fatalf("no merchant on the page:\n%s", body)
		}
		for _, want := range []string{"<dd>" + name[1] + "</dd>", "<dd>CA$19.99</dd>", "ending in 4242</dd>",
			`<dd id="receipt-reference">` + charge + "</dd>", "test payment: no money moved"} {
			if charge == "" || !strings.Contains(rec, want) {
				t.Errorf("the receipt lacks %q:\n%s", want, rec)
			}
		}
		if !strings.Contains(body, testBadge) {
			t.Errorf("the receipt of a test payment has no test-mode badge:\n%s", body)
		}
		if strings.Contains(body, "424242") || strings.Contains(body, "2040") || strings.Contains(rec, "receipt-sent") {
			t.Errorf("the receipt shows more of the card than its brand and last four, or a receipt not sent:\n%s", rec)
		}
		if st := state(t, body); st["receipt"] != true {
			t.Errorf("the page's state does not say it shows a receipt once paid: %v", st)
		}

		other := u[:len(u)-43] + strings.Repeat("A", 43)
		if status, _, body := page(t, other, ""); status != 404 || receiptOf(body) != "" {
			t.Errorf("another token: %d, receipt %q", status, receiptOf(body))
		}

		s.clock.Advance(billing.ReceiptWindow)
		rec = receiptOf(mustPage(t, u))
		if rec == "" || strings.Contains(rec, "4242") || !strings.Contains(rec, charge) {
			t.Errorf("past the receipt window, want the receipt without the card:\n%s", rec)
		}
	})
}
