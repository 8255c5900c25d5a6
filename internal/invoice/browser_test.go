package invoice_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Paying an invoice in Chromium as its customer does: the e-mail's payment_url opens the card form
// with the invoice on it, the card is typed in, and the form says the payment is complete; the
// invoice is PAID, its receipt queued, its charge in the ledger. Then the link says it is paid.
func TestPayingAnInvoiceInBrowser(t *testing.T) {
	db := storetest.SQLite(t)
	f := newFixture(t, db)
	m := f.m
	inv := sentInvoice(t, m, "WEB-1")
	tab := browsertest.New(t)
	browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(inv.Str("payment_url")),
		chromedp.WaitVisible(chromedp.CSS("#card-number")))
	page := browsertest.Eval[string](t, tab, `document.querySelector('main').textContent`)
	for _, w := range []string{"Test Shop", "Invoice WEB-1", "Consulting day", "113.00 CAD"} {
		if !strings.Contains(page, w) {
			t.Fatalf("the card form lacks %q: %s", w, page)
		}
	}
	browsertest.CheckAccessibility(t, tab, "the invoice's card form") // its lines and totals as well as the form
	browsertest.Step(t, tab, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#card-number"), cardtest.Visa),
		chromedp.SendKeys(chromedp.CSS("#card-expiry"), "12 / 40"),
		chromedp.SendKeys(chromedp.CSS("#card-cvc"), "123"),
		chromedp.SendKeys(chromedp.CSS("#card-name"), "Payer Person"),
		chromedp.Click(chromedp.CSS("#pay-button")),
	)
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := browsertest.Eval[string](t, tab, `document.getElementById('outcome').textContent`)
		if strings.Contains(got, "payment is complete") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the form says %q after paying", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := m.Do(t, "GET", base+"/"+inv.Str("lookup_id"), nil)
	if info, _ := got.Body["payment_info"].(map[string]any); got.Str("status") != "PAID" || info == nil || info["card_last4"] != "4242" {
		t.Fatalf("after paying in the browser: %s", got.Raw)
	}
	if all, approved := charges(t, db, m.ID); all != 1 || approved != 1 || len(receipts(t, db, m.ID)) != 1 {
		t.Fatalf("%d transactions, %d approved, %d receipts", all, approved, len(receipts(t, db, m.ID)))
	}
	browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(inv.Str("payment_url")))
	if text := browsertest.Eval[string](t, tab, `document.body.textContent`); !strings.Contains(text, "This invoice is paid.") {
		t.Fatalf("the link after paying: %s", text)
	}
}
