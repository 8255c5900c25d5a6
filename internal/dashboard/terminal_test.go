package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
	"github.com/kassapay/kassa/internal/vault"
)

// framePath finds the hosted card form's path in a page that frames it.
var framePath = regexp.MustCompile(`<iframe id="card-frame" title="Card form" src="(/hpp/[A-Za-z0-9_-]+)"`)

// The terminal is for sellers: reporting gets 403 on the page and on a direct POST; sales, admins and
// owners get the form, and a good order gets the hosted card form in an iframe, on a page whose CSP
// may frame only Kassa's own pages. The hosted page for it may be framed only by Kassa (not by the
// merchant's shop). Bad input is refused next to its field, naming it; nothing is created.
func TestTerminalRolesAndForm(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		rep := s.browser(t)
		csrf := rep.signIn("reporting@maple.example")
		resp, body := rep.get("/dashboard/terminal")
		wantStatus(t, "reporting opens the terminal", resp, body, http.StatusForbidden)
		resp, body = rep.post("/dashboard/terminal", url.Values{"csrf_token": {csrf}, "kind": {"SALE"}, "currency": {"CAD"}, "amount": {"10.00"}})
		wantStatus(t, "reporting posts to the terminal", resp, body, http.StatusForbidden)
		if strings.Contains(body, "/hpp/") {
			t.Fatal("reporting's POST made a card form")
		}

		sales := s.browser(t)
		csrf = sales.signIn("sales@maple.example")
		resp, body = sales.get("/dashboard/terminal")
		wantStatus(t, "sales opens the terminal", resp, body, http.StatusOK)
		if !strings.Contains(body, `<a href="/dashboard/terminal" aria-current="page">Terminal</a>`) {
			t.Error("the terminal is not in sales' navigation")
		}
		for _, tc := range []struct {
			form  url.Values
			field string
		}{
			{url.Values{"kind": {"SALE"}, "currency": {"CAD"}, "amount": {"ten"}}, "amount"},
			{url.Values{"kind": {"SALE"}, "currency": {"CAD"}, "amount": {"0"}}, "amount"},
			{url.Values{"kind": {"SALE"}, "currency": {"CAD"}, "amount": {"10.005"}}, "amount"},
			{url.Values{"kind": {"SALE"}, "currency": {"CAD"}, "amount": {"9999999999"}}, "amount"},
			{url.Values{"kind": {"SALE"}, "currency": {"EUR"}, "amount": {"10"}}, "currency"},
			{url.Values{"kind": {"REFUND"}, "currency": {"CAD"}, "amount": {"10"}}, "kind"},
			{url.Values{"kind": {"SALE"}, "currency": {"CAD"}, "amount": {"10"}, "email": {"not an address"}}, "email"},
			{url.Values{"kind": {"SALE"}, "currency": {"CAD"}, "amount": {"10"}, "order_id": {strings.Repeat("x", 101)}}, "order_id"},
			{url.Values{"kind": {"SALE"}, "currency": {"CAD"}, "amount": {"10"}, "save": {"new"}}, "email"},
			// Sales staff may save a card only to a new customer (TestTerminalSavesToCustomersByRole).
			{url.Values{"kind": {"SALE"}, "currency": {"CAD"}, "amount": {"10"}, "save": {"existing"}, "customer": {"nobody@maple.example"}}, "save"},
		} {
			tc.form.Set("csrf_token", csrf)
			resp, body := sales.post("/dashboard/terminal", tc.form)
			if resp.StatusCode < 400 || resp.StatusCode >= 500 || !strings.Contains(body, `id="`+tc.field+`-error"`) || strings.Contains(body, "/hpp/") {
				t.Errorf("%v: %d, want a 4xx naming %s without a card form\n%s", tc.form, resp.StatusCode, tc.field, body)
			}
		}

		resp, body = sales.post("/dashboard/terminal", url.Values{"csrf_token": {csrf}, "kind": {"SALE"}, "currency": {"USD"}, "amount": {"12.5"},
			"order_id": {"PO-1"}})
		wantStatus(t, "a good order", resp, body, http.StatusOK)
		m := framePath.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no card form in the page:\n%s", body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-src 'self'") || !strings.Contains(csp, "script-src 'nonce-") {
			t.Errorf("the card form's page CSP: %s", csp)
		}
		if !strings.Contains(body, "Sale of $12.50, mail or telephone order, order PO-1.") {
			t.Errorf("the page does not say what the form does:\n%s", body)
		}
		// Without script, the page's link goes to the result, which says the form is still open.
		done := regexp.MustCompile(`<a class="button" id="done" href="(/dashboard/terminal/sessions/cs_[A-Z0-9]+)">See the result</a>`).FindStringSubmatch(body)
		if done == nil {
			t.Fatalf("no link to the result:\n%s", body)
		}
		resp, body = sales.get(done[1])
		if resp.StatusCode != 200 || !strings.Contains(body, "The payment is not finished") {
			t.Errorf("the result of an open form: %d\n%s", resp.StatusCode, body)
		}
		resp, _ = sales.get(m[1])
		if csp := resp.Header.Get("Content-Security-Policy"); resp.StatusCode != 200 || !strings.HasSuffix(csp, "frame-ancestors 'self'") {
			t.Errorf("the terminal's hosted page: %d, CSP %s", resp.StatusCode, csp)
		}
		// Another page's CSP still frames nothing.
		resp, _ = sales.get("/dashboard/terminal")
		if csp := resp.Header.Get("Content-Security-Policy"); strings.Contains(csp, "frame-src") {
			t.Errorf("the terminal's form page may frame: %s", csp)
		}
	})
}

// typeCard fills the hosted card form framed by the dashboard's page in ctx (same origin: reached
// through the frame's document), typing as a person would, and submits it.
func typeCard(t *testing.T, ctx context.Context, number string) {
	t.Helper()
	frame := `document.getElementById('card-frame').contentDocument`
	deadline := time.Now().Add(30 * time.Second)
	for !browsertest.Eval[bool](t, ctx, `!!(`+frame+` && `+frame+`.getElementById('card-number') && !`+frame+`.getElementById('card-form').hidden)`) {
		if time.Now().After(deadline) {
			t.Fatal("the card form never showed in the frame")
		}
		time.Sleep(50 * time.Millisecond)
	}
	expiry := time.Now().AddDate(2, 0, 0).Format("01") + time.Now().AddDate(2, 0, 0).Format("06")
	for _, f := range []struct{ id, text string }{{"card-number", number}, {"card-expiry", expiry}, {"card-cvc", "123"}, {"card-name", "Ada Lovelace"}} {
		browsertest.Eval[bool](t, ctx, `(e => (e.value = '', e.focus(), true))(`+frame+`.getElementById('`+f.id+`'))`)
		browsertest.Step(t, ctx, 10*time.Second, chromedp.KeyEvent(f.text))
	}
	browsertest.Eval[bool](t, ctx, frame+`.getElementById('pay-button').click(), true`)
}

// waitPath waits until the tab's page is at a path matching re, and returns it.
func waitPath(t *testing.T, ctx context.Context, re string) string {
	t.Helper()
	return waitLocation(t, ctx, `location.pathname`, re)
}

// waitLocation waits until what expr says of the page's location (its pathname, or pathname and
// search) matches re and the page is parsed, and returns it: a page's elements are not the next
// page's until then, and a page still loading may not have them yet.
// A read that the page's navigation interrupts ("Inspected target navigated or closed") is read again
// from the next page.
func waitLocation(t *testing.T, ctx context.Context, expr, re string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		p, err := chromedp.Run(rctx, chromedp.Evaluate[string](`document.readyState === 'loading' ? '(loading) ' + `+expr+` : `+expr))
		cancel()
		if err == nil && regexp.MustCompile(re).MatchString(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page stayed at %s (%v), want %s", p, err, re)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// terminalOrder fills the terminal's form in the browser and continues to the card form.
func terminalOrder(t *testing.T, ctx context.Context, base string, fields map[string]string, choices ...string) {
	t.Helper()
	browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(base+"/dashboard/terminal"), chromedp.WaitVisible(chromedp.CSS("#amount")))
	for _, c := range choices {
		browsertest.Step(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS("#"+c)))
	}
	for id, v := range fields {
		browsertest.Step(t, ctx, 10*time.Second, chromedp.SendKeys(chromedp.CSS("#"+id), v))
	}
	browsertest.Step(t, ctx, 30*time.Second, chromedp.Click(chromedp.CSS("form button[type=submit].primary")), chromedp.WaitVisible(chromedp.CSS("#card-frame")))
}

// transaction reads a ledger transaction by id.
func transaction(t *testing.T, s *shop, id string) payment.Transaction {
	t.Helper()
	tx, err := s.srv.Ledger().Get(context.Background(), s.merchantID, id)
	if err != nil {
		t.Fatalf("transaction %s: %v", id, err)
	}
	return tx
}

// In Chromium, a terminal sale typed into the iframe: sales staff take a mail order at
// 375 px, typing the card into the hosted form the terminal page frames, with the card saved to a new
// customer. The page goes on by itself when the form ends and says where the card went; the sale is
// on the ledger as the sales user's mail order with its order id and e-mail, the vault holds the card
// on the new customer, and the receipt waits in the outbox; an admin's second sale saves its card to
// that customer, now an existing one, found by e-mail, without making it the default. Neither the
// terminal's page nor any
// response Kassa sent outside the hosted form held the card number (servertest checks every body).
// An owner's authorization, with nothing to save, lands on its transaction's page.
func TestTerminalSaleInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		ctx := browsertest.New(t)
		browsertest.Step(t, ctx, 10*time.Second, chromedp.EmulateViewport(375, 800))
		signInInBrowser(t, ctx, s.srv.URL, "sales@maple.example", pw, "nav")
		terminalOrder(t, ctx, s.srv.URL, map[string]string{"amount": "12.50", "order_id": "PO-7", "email": "ada@example.com",
			"first_name": "Ada", "last_name": "Lovelace"}, "save-new")
		if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
			t.Errorf("the card form's page is %d px wide at 375", w)
		}
		typeCard(t, ctx, cardtest.Visa)
		waitPath(t, ctx, `^/dashboard/terminal/sessions/cs_`)
		browsertest.Step(t, ctx, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#saved")))
		if html := browsertest.Eval[string](t, ctx, `document.documentElement.outerHTML`); strings.Contains(html, cardtest.Visa) {
			t.Fatal("the result page holds the card number")
		}
		saved := browsertest.Eval[string](t, ctx, `document.getElementById('saved').textContent`)
		customer := browsertest.Eval[string](t, ctx, `document.querySelector('#saved a').getAttribute('href')`)
		href := browsertest.Eval[string](t, ctx, `document.getElementById('transaction').getAttribute('href')`)
		if !strings.HasPrefix(saved, "The card is saved to the customer") || !strings.HasPrefix(customer, "/dashboard/customers/") {
			t.Fatalf("the result says %q, links %q", saved, customer)
		}
		sale := transaction(t, s, strings.TrimPrefix(href, "/dashboard/transactions/"))
		if sale.Kind != payment.KindSale || sale.Status != payment.StatusApproved || sale.Amount != 1250 || sale.Currency.Code != "CAD" ||
			sale.OrderID != "PO-7" || sale.Email != "ada@example.com" || !sale.MailOrder || sale.ClientID != "dashboard/"+s.users[user.Sales].ID ||
			sale.CardSuffix != "4242" {
			t.Fatalf("the terminal's sale on the ledger: %+v", sale)
		}
		c, err := s.srv.Vault().Get(context.Background(), s.merchantID, strings.TrimPrefix(customer, "/dashboard/customers/"))
		if err != nil || c.Email != "ada@example.com" || c.FirstName != "Ada" || len(c.Cards) != 1 || c.Cards[0].Suffix != "4242" || !c.Cards[0].IsDefault {
			t.Fatalf("the new customer in the vault: %+v, %v", c, err)
		}
		receipts := 0
		for _, e := range billingtest.Outbox(t, db) {
			if e.To == "ada@example.com" && strings.Contains(e.Text, sale.TransactionID) {
				receipts++
			}
		}
		if receipts != 1 {
			t.Fatalf("receipts queued to ada@example.com: %d", receipts)
		}

		// A second order of the same customer, by telephone, taken by an admin (sales staff save cards
		// only to new customers): the card saved to her as an existing customer, found by her e-mail
		// (its case as the caller spelled it). The vault adds the card to her, the first staying the
		// default (the box that would change it left unticked); no customer is made.
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Click(chromedp.CSS("header form button")), chromedp.WaitVisible(chromedp.CSS("#email")))
		signInInBrowser(t, ctx, s.srv.URL, "admin@maple.example", pw, "nav")
		terminalOrder(t, ctx, s.srv.URL, map[string]string{"amount": "8.00", "order_id": "PO-8", "customer": "Ada@Example.com"}, "save-existing")
		if summary := browsertest.Eval[string](t, ctx, `document.querySelector('main').textContent`); !strings.Contains(summary, "Sale of CA$8.00") {
			t.Fatalf("the card form's page for the existing customer: %s", summary)
		}
		typeCard(t, ctx, cardtest.Mastercard)
		waitPath(t, ctx, `^/dashboard/terminal/sessions/cs_`)
		browsertest.Step(t, ctx, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#saved")))
		saved = browsertest.Eval[string](t, ctx, `document.getElementById('saved').textContent`)
		if again := browsertest.Eval[string](t, ctx, `document.querySelector('#saved a').getAttribute('href')`); again != customer ||
			!strings.HasPrefix(saved, "The card is saved to the customer") {
			t.Fatalf("the result of the save to an existing customer says %q, links %q, want %q", saved, again, customer)
		}
		href = browsertest.Eval[string](t, ctx, `document.getElementById('transaction').getAttribute('href')`)
		second := transaction(t, s, strings.TrimPrefix(href, "/dashboard/transactions/"))
		if second.Kind != payment.KindSale || second.Status != payment.StatusApproved || second.Amount != 800 || second.OrderID != "PO-8" ||
			!second.MailOrder || second.CardSuffix != "4444" {
			t.Fatalf("the second terminal sale on the ledger: %+v", second)
		}
		c, err = s.srv.Vault().Get(context.Background(), s.merchantID, c.LookupID)
		if err != nil || len(c.Cards) != 2 || !c.Cards[0].IsDefault || c.Cards[0].Suffix != "4242" || c.Cards[1].Suffix != "4444" || c.Cards[1].IsDefault {
			t.Fatalf("the existing customer's cards in the vault: %+v, %v", c.Cards, err)
		}
		var customers int
		if err := db.Read(context.Background(), func(q store.Querier) error {
			return q.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM customers WHERE merchant_id = $1`, s.merchantID).Scan(&customers)
		}); err != nil || customers != 1 {
			t.Fatalf("the merchant has %d customers after a save to an existing one, %v", customers, err)
		}

		// An owner's authorization: nothing to save, the page goes on to the transaction.
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Click(chromedp.CSS("header form button")), chromedp.WaitVisible(chromedp.CSS("#email")))
		signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
		terminalOrder(t, ctx, s.srv.URL, map[string]string{"amount": "40"}, "kind-auth")
		typeCard(t, ctx, cardtest.ThreeDSecure) // a card whose issuer asks for 3-D Secure: a mail order is not asked
		p := waitPath(t, ctx, `^/dashboard/transactions/`)
		auth := transaction(t, s, strings.TrimPrefix(p, "/dashboard/transactions/"))
		if auth.Kind != payment.KindAuthorization || auth.Status != payment.StatusApproved || auth.Amount != 4000 || !auth.MailOrder ||
			auth.ClientID != "dashboard/"+s.users[user.Owner].ID || auth.OrderID != "" {
			t.Fatalf("the terminal's authorization on the ledger: %+v", auth)
		}
		// The transaction's page says how it was ordered.
		if body := browsertest.Eval[string](t, ctx, `document.querySelector('main').textContent`); !strings.Contains(body, "Mail or telephone (virtual terminal)") {
			t.Fatalf("the transaction's page does not say it was a mail or telephone order: %s", body)
		}
		// Sales staff do not open the owner's session's result.
		sales := s.browser(t)
		sales.signIn("sales@maple.example")
		var sessionID string
		if err := db.Read(context.Background(), func(q store.Querier) error {
			return q.QueryRowContext(context.Background(), `SELECT session_id FROM checkout_sessions WHERE client_id = $1`,
				"dashboard/"+s.users[user.Owner].ID).Scan(&sessionID)
		}); err != nil {
			t.Fatal(err)
		}
		resp, body := sales.get("/dashboard/terminal/sessions/" + sessionID)
		wantStatus(t, "sales opens the owner's terminal session", resp, body, http.StatusNotFound)
	})
}

// In Chromium: a manager adds a card to a customer through the hosted card form framed by
// /dashboard/customers/{id}/cards/new, which stores it on that customer with no payment and goes back
// to the customer; the same card again is refused as the vault refuses it (duplicate_card), in the
// form. Another merchant's customer is not found, and the page is for managers only.
func TestAddCardInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		ctx := context.Background()
		n, _ := card.ParseNumber(cardtest.Mastercard)
		c, _, err := s.srv.Vault().SaveCard(ctx, s.merchantID, vault.SaveTo{New: &vault.Details{Email: "grace@example.com"}}, n,
			card.Expiry{Month: 12, Year: time.Now().Year() + 2})
		if err != nil {
			t.Fatal(err)
		}
		other := s.srv.NewMerchant(t)
		oc, _, err := s.srv.Vault().SaveCard(ctx, other.ID, vault.SaveTo{New: &vault.Details{Email: "other@example.com"}}, n,
			card.Expiry{Month: 12, Year: time.Now().Year() + 2})
		if err != nil {
			t.Fatal(err)
		}
		admin := s.browser(t)
		admin.signIn("admin@maple.example")
		resp, body := admin.get("/dashboard/customers/" + oc.LookupID + "/cards/new")
		wantStatus(t, "another merchant's customer", resp, body, http.StatusNotFound)
		for _, role := range []user.Role{user.Sales, user.Reporting} {
			b := s.browser(t)
			b.signIn(string(role) + "@maple.example")
			resp, body := b.get("/dashboard/customers/" + c.LookupID + "/cards/new")
			wantStatus(t, string(role)+" adds a card", resp, body, http.StatusForbidden)
		}

		tab := browsertest.New(t)
		signInInBrowser(t, tab, s.srv.URL, "admin@maple.example", pw, "nav")
		browsertest.Step(t, tab, 30*time.Second, chromedp.Navigate(s.srv.URL+"/dashboard/customers/"+c.LookupID+"/cards/new"),
			chromedp.WaitVisible(chromedp.CSS("#card-frame")))
		if b := browsertest.Eval[string](t, tab, `document.getElementById('card-frame').contentDocument.getElementById('pay-button').textContent`); b != "Save the card" {
			t.Errorf("the form's button says %q", b)
		}
		typeCard(t, tab, cardtest.Mastercard) // stored already: refused, the form stays
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(browsertest.Eval[string](t, tab, `document.getElementById('card-frame').contentDocument.getElementById('form-status').textContent`), "already stored") {
			if time.Now().After(deadline) {
				t.Fatal("the duplicate card was not refused in the form")
			}
			time.Sleep(50 * time.Millisecond)
		}
		typeCard(t, tab, cardtest.Visa)
		waitPath(t, tab, "^/dashboard/customers/"+c.LookupID+"$")
		got, err := s.srv.Vault().Get(ctx, s.merchantID, c.LookupID)
		if err != nil || len(got.Cards) != 2 || got.Cards[1].Suffix != "4242" || got.Cards[1].IsDefault || !got.Cards[0].IsDefault {
			t.Fatalf("the customer's cards: %+v, %v", got.Cards, err)
		}
		var charged int
		if err := db.Read(ctx, func(q store.Querier) error {
			return q.QueryRowContext(ctx, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1`, s.merchantID).Scan(&charged)
		}); err != nil || charged != 0 {
			t.Fatalf("adding a card made %d transactions, %v", charged, err)
		}
	})
}

// The terminal's pages with axe-core, light and dark, desktop and phone: the form, the form with its
// errors, the card form's page (with the hosted form in it), the result page, and the customer's card
// form; on SQLite.
func TestTerminalAccessible(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		ctx := browsertest.New(t)
		signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+"/dashboard/terminal"), chromedp.WaitVisible(chromedp.CSS("#amount")))
		browsertest.CheckAccessibilityEverywhere(t, ctx, "terminal")
		browsertest.Step(t, ctx, 30*time.Second, chromedp.SendKeys(chromedp.CSS("#amount"), "ten"), chromedp.Click(chromedp.CSS("#save-existing")),
			chromedp.Click(chromedp.CSS("form button[type=submit].primary")), chromedp.WaitVisible(chromedp.CSS("#amount-error")))
		browsertest.CheckAccessibilityEverywhere(t, ctx, "terminal with an error")
		terminalOrder(t, ctx, s.srv.URL, map[string]string{"amount": "5", "email": "ada@example.com"}, "save-new")
		browsertest.CheckAccessibilityEverywhere(t, ctx, "terminal card form")
		typeCard(t, ctx, cardtest.Visa)
		waitPath(t, ctx, `^/dashboard/terminal/sessions/`)
		browsertest.Step(t, ctx, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#saved")))
		browsertest.CheckAccessibilityEverywhere(t, ctx, "terminal result")
		customer := browsertest.Eval[string](t, ctx, `document.querySelector('#saved a').getAttribute('href')`)
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+customer+"/cards/new"), chromedp.WaitVisible(chromedp.CSS("#card-frame")))
		browsertest.CheckAccessibilityEverywhere(t, ctx, "add a card")
	})
}
