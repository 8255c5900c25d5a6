package invoice_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Paying an invoice in Chromium as its customer does, on SQLite: the e-mail's payment_url
// opens the card form with the invoice on it, the card is typed in, and the form says the payment is
// complete and shows the receipt; the invoice is PAID and its charge is the ledger's one sale. The billing engine's mailer
// delivers the invoice's e-mail (with its pay and PDF links) and the receipt to a real SMTP server;
// the payment is in the transaction list, read with a token of scope ecom, with the invoice's number
// as its order id. Then the link says it is paid.
func TestPayingAnInvoiceInBrowser(t *testing.T) {
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		inbox := billingtest.StartInbox(t, "127.0.0.1:0")
		mailer, err := billing.NewMailer("smtp://"+inbox.Addr, "Test Shop <billing@shop.example>")
		if err != nil {
			t.Fatal(err)
		}
		srv := servertest.Start(t, db, server.Config{Billing: billing.Config{Mailer: mailer}})
		m := srv.NewMerchant(t)
		inv := sentInvoice(t, m, "WEB-1")
		tab := browsertest.New(t)
		browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(inv.Str("payment_url")),
			chromedp.WaitVisible(chromedp.CSS("#card-number")))
		page := browsertest.Eval[string](t, tab, `document.querySelector('main').textContent`)
		for _, w := range []string{"Test Shop", "Invoice WEB-1", "Consulting day", "CA$113.00"} {
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
		// The form says the payment is complete, and the page, loaded again, shows the receipt.
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := browsertest.Eval[string](t, tab, `['receipt', 'outcome'].map(function (id) {
				var el = document.getElementById(id); return el ? el.textContent : ''; }).join(' | ')`)
			if strings.Contains(got, "payment is complete") && strings.Contains(got, "VISA ending in 4242") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the form says %q after paying", got)
			}
			time.Sleep(50 * time.Millisecond)
		}
		browsertest.CheckAccessibility(t, tab, "the receipt on the invoice's card form")
		got := m.Do(t, "GET", base+"/"+inv.Str("lookup_id"), nil)
		info, _ := got.Body["payment_info"].(map[string]any)
		if got.Str("status") != "PAID" || info == nil || info["card_last4"] != "4242" {
			t.Fatalf("after paying in the browser: %s", got.Raw)
		}
		txID, _ := info["transaction_id"].(string)
		if all, approved := charges(t, db, m.ID); all != 1 || approved != 1 {
			t.Fatalf("%d transactions, %d approved", all, approved)
		}

		// The e-mails, as the billing engine's mailer delivered them to the SMTP server: the
		// invoice's, then the receipt.
		deadline = time.Now().Add(20 * time.Second)
		for len(inbox.Messages()) < 2 && time.Now().Before(deadline) {
			if _, err := srv.Billing().Deliver(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		msgs := inbox.Messages()
		if len(msgs) != 2 {
			t.Fatalf("%d e-mails delivered, want the invoice's and its receipt", len(msgs))
		}
		want := []struct {
			subject string
			has     []string
		}{
			{"Invoice WEB-1 from Test Shop", []string{"Consulting day", "CA$113.00", inv.Str("payment_url"), inv.Str("pdf_url")}},
			// Paid on the simulator: the receipt says it moved no money.
			{"Receipt from Test Shop: CA$113.00 (Test payment — no money moved)",
				[]string{"Test payment — no money moved", "CA$113.00", "VISA ending in 4242", txID, "Invoice WEB-1"}},
		}
		for i, w := range want {
			_, subject, parts := billingtest.Read(t, msgs[i])
			if subject != w.subject || strings.Join(msgs[i].Rcpt, ",") != "pay@example.com" {
				t.Fatalf("e-mail %d: %q to %v, want %q to pay@example.com", i, subject, msgs[i].Rcpt, w.subject)
			}
			for _, typ := range []string{"text/plain", "text/html"} {
				for _, s := range w.has {
					if !strings.Contains(parts[typ], s) {
						t.Errorf("%q, %s: lacks %q:\n%s", subject, typ, s, parts[typ])
					}
				}
				cardtest.Check(t, subject, parts[typ])
			}
		}

		// The payment in the transaction list, as the merchant's shop reads it with scope ecom.
		cfg := clientcredentials.Config{ClientID: m.Creds.ClientID, ClientSecret: m.Creds.ClientSecret,
			TokenURL: srv.URL + "/oauth/token", Scopes: []string{"ecom"}}
		tok, err := cfg.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		list := srv.Do(t, "GET", "/transaction-service/transaction", nil, "Authorization", "Bearer "+tok.AccessToken)
		entities, _ := list.Body["entities"].([]any)
		if list.Status != 200 || len(entities) != 1 {
			t.Fatalf("the transaction list: %d %s", list.Status, list.Raw)
		}
		tx := entities[0].(map[string]any)
		if tx["transaction_id"] != txID || tx["order_id"] != "WEB-1" || tx["transaction_result"] != "APPROVED" ||
			tx["amount"].(interface{ String() string }).String() != "113.00" || tx["currency"] != "CAD" {
			t.Fatalf("the invoice's payment in the transaction list: %v", tx)
		}

		browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(inv.Str("payment_url")))
		if text := browsertest.Eval[string](t, tab, `document.body.textContent`); !strings.Contains(text, "This invoice is paid.") {
			t.Fatalf("the link after paying: %s", text)
		}
	})
}
