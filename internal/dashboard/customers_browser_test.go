package dashboard_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// In Chromium, a card saved from the terminal and charged from the customer page: an
// owner takes a mail order at the terminal, the card typed into the hosted form and saved to a new
// customer; then finds the customer by e-mail from the navigation, opens the customer, charges the
// stored card with a double click on the button, and lands on the sale, which the ledger holds once,
// as the owner's.
func TestChargeStoredCardInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		ctx := browsertest.New(t)
		signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
		terminalOrder(t, ctx, s.srv.URL, map[string]string{"amount": "9.00", "email": "jane@roe.example", "first_name": "Jane", "last_name": "Roe"}, "save-new")
		typeCard(t, ctx, cardtest.Visa)
		waitPath(t, ctx, `^/dashboard/terminal/sessions/cs_`)
		browsertest.Step(t, ctx, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#saved a")))
		c := strings.TrimPrefix(browsertest.Eval[string](t, ctx, `document.querySelector('#saved a').getAttribute('href')`), "/dashboard/customers/")
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.EmulateViewport(375, 740),
			chromedp.Click(chromedp.CSS(`details.menu summary`)), // the navigation is a menu at this width
			chromedp.Click(chromedp.CSS(`nav a[href="/dashboard/customers"]`)),
			chromedp.WaitVisible(chromedp.CSS("#q")),
			chromedp.SendKeys(chromedp.CSS("#q"), "JANE@roe.example\r"),
		)
		// The list before the search has its own #customers: the search's results are on the next page.
		waitLocation(t, ctx, `location.pathname + location.search`, `^/dashboard/customers\?(.*&)?q=`)
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.WaitVisible(chromedp.CSS("#customers")),
			chromedp.Click(chromedp.CSS(`#customers a[href="/dashboard/customers/`+c+`"]`)),
			chromedp.WaitVisible(chromedp.CSS("#cards")),
		)
		if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
			t.Errorf("the customer's page is %d px wide at 375", w)
		}
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS(`#cards a[href$="/charge"]`)),
			chromedp.WaitVisible(chromedp.CSS("#amount")),
			chromedp.SendKeys(chromedp.CSS("#amount"), "25.50"),
			chromedp.DoubleClick(chromedp.CSS(`main form button[type=submit]`)),
		)
		path := waitPath(t, ctx, "^/dashboard/transactions/")
		sale := onlyPayment(t, s, c)
		if path != "/dashboard/transactions/"+sale.TransactionID || sale.Amount != 2550 || sale.Kind != payment.KindSale ||
			sale.ClientID != "dashboard/"+s.users[user.Owner].ID {
			t.Fatalf("landed on %s; the sale %+v", path, sale)
		}
		// Back on the customer's page, the sale is among its payments.
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Navigate(s.srv.URL+"/dashboard/customers/"+c),
			chromedp.WaitVisible(chromedp.CSS("#payments")),
		)
		if got := browsertest.Eval[string](t, ctx, `document.querySelector('#payments tbody').textContent`); !strings.Contains(got, sale.TransactionID) {
			t.Fatalf("the customer's payments: %q", got)
		}
	})
}

// Every customer page, checked with axe-core in light and dark, at desktop and at 375 px (where none
// is wider than the screen): the list and an empty search, a customer with cards, a subscription and
// payments, the new and edit forms (one with an error), the confirmations (one with a 409), and the
// charge form (with an error); on SQLite.
func TestCustomerPagesAccessible(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		a := s.api(t, s.merchantID)
		c, cards := a.customer(map[string]any{"email": "jane@roe.example", "first_name": "Jane", "last_name": "Roe", "company": "Roe Provisions",
			"address1": "1 Long Street", "city": "Halifax"}, cardtest.Visa, cardtest.Amex)
		a.subscribeToNewPlan(c, cards[0], "Coffee club")
		a.call("POST", "/transaction-service/sale/customer/"+c+"/card/"+cards[0], map[string]any{"amount": "20.00"})
		a.customer(map[string]any{"email": "john@smith.example", "first_name": "John", "last_name": "Smith"}, cardtest.Mastercard)
		ctx := browsertest.New(t)
		signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
		check := func(name string) {
			t.Helper()
			browsertest.CheckAccessibilityEverywhere(t, ctx, name)
			browsertest.Viewport(t, ctx, browsertest.Phone)
			if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
				t.Errorf("%s is %d px wide at 375", name, w)
			}
		}
		visit := func(path, wait, name string) {
			t.Helper()
			browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(wait)))
			check(name)
		}
		submit := func(wait, name string) {
			t.Helper()
			browsertest.Step(t, ctx, 30*time.Second, chromedp.Click(chromedp.CSS(`main form button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(wait)))
			check(name)
		}
		base := "/dashboard/customers/" + c
		visit("/dashboard/customers", "#customers", "customers")
		visit("/dashboard/customers?q="+url.QueryEscape("nobody@roe.example"), "#customers-empty", "customers, nothing found")
		visit(base, "#payments", "a customer")
		visit("/dashboard/customers/new", "#email", "new customer")
		submit("#email-error", "new customer, e-mail missing")
		visit(base+"/edit", "#email", "edit a customer")
		visit(base+"/cards/"+cards[1]+"/default", "#question", "make a card the default")
		visit(base+"/cards/"+cards[1]+"/delete", "#question", "delete a card")
		visit(base+"/cards/"+cards[0]+"/delete", "#question", "delete the subscription's card")
		submit("[role=alert]", "delete the subscription's card, refused")
		visit(base+"/delete", "#question", "delete a customer")
		visit(base+"/cards/"+cards[0]+"/charge", "#amount", "charge a card")
		browsertest.Step(t, ctx, 30*time.Second, chromedp.SendKeys(chromedp.CSS("#amount"), "0"))
		submit("#amount-error", "charge a card, a bad amount")
	})
}
