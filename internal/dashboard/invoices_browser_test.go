package dashboard_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// waitText waits until the text of the element of id is want.
func waitText(t *testing.T, ctx context.Context, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := browsertest.Eval[string](t, ctx, `(e => e ? e.textContent.trim() : '(none)')(document.getElementById('`+id+`'))`)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("#%s says %q, want %q", id, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// typeInto types text into the field of id, as a person does.
func typeInto(t *testing.T, ctx context.Context, id, text string) {
	t.Helper()
	browsertest.Step(t, ctx, 10*time.Second, chromedp.SendKeys(chromedp.CSS("#"+strings.ReplaceAll(id, ".", `\.`)), text))
}

// In Chromium: an owner opens Invoices from the navigation and makes an invoice of two lines, the
// total following what is typed (asked of the server as the user types, never computed by the page),
// the second line added in place with the focus on it; saved, the invoice's page shows the copy
// button of its pay link, which copies the link, and the PDF's link; sent with a message, the e-mail
// is in the outbox and the API shows it SENT with the total the page showed.
func TestInvoiceInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		a := s.api(t, s.merchantID)
		ctx := browsertest.New(t)
		signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS(`nav a[href="/dashboard/invoices"]`)),
			chromedp.WaitVisible(chromedp.CSS("#invoices-empty")),
			chromedp.Click(chromedp.CSS(`a[href="/dashboard/invoices/new"]`)),
			chromedp.WaitVisible(chromedp.CSS("#add-line")), // shown by the page's script
		)
		typeInto(t, ctx, "customer_email", "bob@example.com")
		typeInto(t, ctx, "customer_first_name", "Bob")
		typeInto(t, ctx, "line-0-description", "Widgets")
		typeInto(t, ctx, "line-0-quantity", "2")
		typeInto(t, ctx, "line-0-unit_price", "49.99")
		waitText(t, ctx, "total-total", "CA$99.98")
		waitText(t, ctx, "line-0-amount", "CA$99.98, tax CA$0.00")
		typeInto(t, ctx, "tax_rate", "13")
		waitText(t, ctx, "total-total", "CA$112.98")
		browsertest.Step(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#add-line")))
		if f := browsertest.Eval[string](t, ctx, `document.activeElement.name + ' ' + document.querySelectorAll('#lines legend')[1].textContent`); f != "items[1].description Line 2" {
			t.Fatalf("after adding a line the focus is on %q", f)
		}
		typeInto(t, ctx, "line-1-description", "Consulting hours")
		waitText(t, ctx, "line-1-amount", "Not counted: Line 2 unit price is required.")
		waitText(t, ctx, "total-total", "CA$112.98") // the line not complete yet does not count
		typeInto(t, ctx, "line-1-quantity", "1.5")
		typeInto(t, ctx, "line-1-unit_price", "33.33")
		waitText(t, ctx, "line-1-amount", "CA$50.00, tax CA$6.50")
		waitText(t, ctx, "total-total", "CA$169.48")
		typeInto(t, ctx, "discount_amount", "5")
		typeInto(t, ctx, "shipping_amount", "12.50")
		waitText(t, ctx, "total-total", "CA$176.98")
		waitText(t, ctx, "total-tax", "CA$19.50")
		if rm := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('.remove-line')].filter(b => !b.hidden).map(b => b.textContent)`); strings.Join(rm, ",") != "Remove line 1,Remove line 2" {
			t.Fatalf("the remove buttons: %q", rm)
		}
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Click(chromedp.CSS(`button[value=save]`)))
		path := waitPath(t, ctx, `^/dashboard/invoices/[A-Z2-7]{10}$`)
		id := strings.TrimPrefix(path, "/dashboard/invoices/")
		inv := a.must(t, "GET", invoiceAPI+"/"+id, nil)
		if inv.Num("total_amount") != "176.98" || len(inv.Body["items"].([]any)) != 2 || inv.Str("status") != "DRAFT" {
			t.Fatalf("the invoice made in the browser: %s", inv.Raw)
		}

		// The pay link: a button that copies it, and the link as text to select without script.
		browsertest.Step(t, ctx, 30*time.Second,
			func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) { // the test reads the clipboard back
				c := chromedp.FromContext(ctx) // the permission is the tab's browser context's
				for _, name := range []string{"clipboard-read", "clipboard-write"} {
					if _, err := cdp.Call(ctx, c.Browser, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
						Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: s.srv.URL,
						BrowserContextID: c.BrowserContextID}); err != nil {
						return chromedp.Void{}, err
					}
				}
				return chromedp.Void{}, nil
			},
			chromedp.WaitVisible(chromedp.CSS(`button[data-copy="pay-link"]`)),
			chromedp.Click(chromedp.CSS(`button[data-copy="pay-link"]`)),
		)
		waitText(t, ctx, "copy-pay-link", "Copied")
		copied, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
		if err != nil || copied != inv.Str("payment_url") || browsertest.Eval[string](t, ctx, `document.getElementById('pay-link').textContent`) != copied {
			t.Fatalf("the pay link copied: %q (%v), the invoice's %q", copied, err, inv.Str("payment_url"))
		}
		if pdf := browsertest.Eval[string](t, ctx, `document.getElementById('pdf-link').href`); pdf != strings.TrimSuffix(copied, "/pay")+"/pdf" {
			t.Fatalf("the PDF's link: %q", pdf)
		}

		// Send it, with a message.
		typeInto(t, ctx, "send-message", "Thank you, Bob!")
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Click(chromedp.CSS(`#send-form button[type=submit]`)))
		waitLocation(t, ctx, `location.pathname + location.search`, `\?done=sent$`)
		waitText(t, ctx, "send-heading", "Send it again")
		if got := mails(t, db, "bob@example.com"); len(got) != 1 || got[0] != "Invoice INV-0001 from Maple & Birch Goods" {
			t.Fatalf("the e-mails: %q", got)
		}
		if r := a.must(t, "GET", invoiceAPI+"/"+id, nil); r.Str("status") != "SENT" || r.Num("total_amount") != "176.98" {
			t.Fatalf("the sent invoice: %s", r.Raw)
		}
	})
}

// Every invoice page, checked with axe-core in light and dark, at desktop and at 375 px (where none is
// wider than the screen): the list with its totals, a search that finds nothing, the new form and the
// form refused with its errors beside the fields, the edit form, a draft with its forms and its
// confirmations open, a paid invoice with its payment, and a send refused; on SQLite.
func TestInvoicePagesAccessible(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{NoBillingEngine: true})
		a := s.api(t, s.merchantID)
		c, cards := a.customer(map[string]any{"email": "erin@example.com", "first_name": "Erin", "last_name": "Ekwueme", "company": "Ekwueme Tiles",
			"address1": "4 Harbour Road", "city": "Halifax", "province": "NS", "postal_code": "B3H 1A1", "country": "CA"}, cardtest.Visa)
		paid := a.invoice(t, true, map[string]any{"invoice_number": "2026-041", "customer_lookup_id": c, "tax_rate": "15", "due_date": "2030-02-28",
			"notes": "Thank you for your business.", "terms": "Net 30",
			"items": []map[string]any{{"description": "Tiles, hand-glazed, per square metre", "quantity": "12.5", "unit_price": "84.00", "sku": "T-HG-1"},
				{"description": "Fitting", "unit_price": "300.00"}}})
		a.must(t, "POST", invoiceAPI+"/"+paid+"/pay", map[string]any{"card_lookup_id": cards[0]})
		draft := a.invoice(t, false, oneLine("2026-042", "USD", "45.00", "fay@example.com"))
		ctx := browsertest.New(t)
		signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
		check := func(name string) {
			t.Helper()
			browsertest.CheckAccessibilityEverywhere(t, ctx, name)
			browsertest.Viewport(t, ctx, browsertest.Phone)
			if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
				t.Errorf("%s is %d px wide at 375", name, w)
			}
			browsertest.Viewport(t, ctx, browsertest.Desktop)
		}
		visit := func(path, wait, name string) {
			t.Helper()
			browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(wait)))
			check(name)
		}
		visit("/dashboard/invoices", "#invoice-sums", "invoices")
		visit("/dashboard/invoices?status=PAID&q="+url.QueryEscape("nobody@example.com"), "#invoices-empty", "invoices, nothing found")
		visit("/dashboard/invoices/new", "#add-line", "new invoice")
		typeInto(t, ctx, "line-0-description", "Glue")
		typeInto(t, ctx, "line-0-unit_price", "12.345")
		waitText(t, ctx, "line-0-amount", "Not counted: Line 1 unit price has more decimals than CAD allows (2).")
		waitText(t, ctx, "totals-note", "Line 1 is not counted until it is complete.")
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Click(chromedp.CSS(`button[value=save]`)), chromedp.WaitVisible(chromedp.CSS("#line-0-unit_price-error")))
		check("new invoice, refused")
		visit("/dashboard/invoices/"+draft+"/edit", "#add-line", "edit an invoice")
		visit("/dashboard/invoices/"+draft, "#send-form", "a draft")
		browsertest.Step(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#cancel summary")), chromedp.Click(chromedp.CSS("#delete summary")),
			chromedp.WaitVisible(chromedp.CSS(`#delete button`)))
		check("a draft, its confirmations open")
		browsertest.Step(t, ctx, 30*time.Second, chromedp.SetValue(chromedp.CSS("#send-email"), "not an address"),
			chromedp.Click(chromedp.CSS("#send-form button[type=submit]")), chromedp.WaitVisible(chromedp.CSS("#send-email-error")))
		check("a draft, its sending refused")
		visit("/dashboard/invoices/"+paid, "#payment", "a paid invoice")
	})
}
