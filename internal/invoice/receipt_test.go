package invoice_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// After paying an invoice, its card form and its link show the receipt instead of a bare "paid":
// merchant, amount, the card's brand and last four digits only, date, reference (the charge), the
// address the receipt went to, and the test-payment line. Past billing.ReceiptWindow the link shows
// neither the card nor the address (the link never expires). Another key is a 404 with no receipt.
func TestInvoiceReceipt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		c := clock.NewManual(time.Now())
		srv := servertest.Start(t, db, server.Config{Now: c.Now})
		m := srv.NewMerchant(t)
		m.Update(t, merchant.Update{Currencies: []string{"CAD"}})
		inv := sentInvoice(t, m, "REC-1")
		link := inv.Str("payment_url")
		form, _, status := openForm(t, link)
		if status != 303 {
			t.Fatalf("the invoice page: %d, want a redirect to the card form", status)
		}
		pay := srv.Do(t, "POST", form+"/pay", cardBody)
		if pay.Status != 200 || pay.Str("outcome") != "completed" {
			t.Fatalf("pay: %d %s", pay.Status, pay.Raw)
		}
		txID := pay.Body["payment_intent"].(map[string]any)["latest_charge"].(string)
		section := regexp.MustCompile(`(?s)<section class="receipt".*?</section>`)
		check := func(what, body string) {
			t.Helper()
			rec := section.FindString(body)
			for _, w := range []string{"<dd>Test Shop</dd>", "<dd>CA$113.00</dd>", "ending in 4242</dd>", "<dd>Invoice REC-1</dd>",
				`<dd id="receipt-reference">` + txID + "</dd>", "A receipt was sent to pay@example.com.", "test payment: no money moved"} {
				if !strings.Contains(rec, w) {
					t.Errorf("%s: the receipt lacks %q:\n%s", what, w, body)
				}
			}
			if strings.Contains(body, "424242") || !strings.Contains(body, `id="test-mode"`) {
				t.Errorf("%s: more of the card than its last four, or no test-mode badge:\n%s", what, body)
			}
		}
		formPage, _ := getPage(t, srv.URL+form)
		check("the card form", formPage)
		_, linkPage, status := openForm(t, link)
		if status != 200 {
			t.Fatalf("the paid invoice's link: %d", status)
		}
		check("the link", linkPage)

		other := link[:strings.LastIndex(link, "/invoice/")] + "/invoice/" + strings.Repeat("A", len(strings.Split(link, "/")[4])) + "/pay"
		if body, status := getPage(t, other); status != 404 || section.MatchString(body) {
			t.Errorf("another key: %d\n%s", status, body)
		}

		c.Advance(billing.ReceiptWindow)
		_, linkPage, _ = openForm(t, link)
		rec := section.FindString(linkPage)
		if rec == "" || strings.Contains(rec, "4242") || strings.Contains(rec, "pay@example.com") || !strings.Contains(rec, txID) {
			t.Errorf("past the receipt window, want the receipt without card or address:\n%s", rec)
		}
	})
}
