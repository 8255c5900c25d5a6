package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/totp"
)

// In headless Chromium, at a phone's width: a browser that opens Kassa's address lands on the sign-in
// page; a wrong password is announced, the right one reaches the home page (the nonce'd stylesheet
// applied, the navigation reached by keyboard), and sign-out returns to the sign-in page, after
// which the dashboard asks for a sign-in again.
func TestSignInInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		ctx := browsertest.New(t)
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.EmulateViewport(375, 740),
			chromedp.Navigate(s.srv.URL+"/"),
			chromedp.WaitVisible(chromedp.CSS("#email")),
		)
		if u := browsertest.Eval[string](t, ctx, `location.pathname`); u != "/dashboard/sign-in" {
			t.Fatalf("the browser at / landed on %s", u)
		}
		if n := browsertest.Eval[int](t, ctx, `document.getElementById('email').labels.length + document.getElementById('password').labels.length`); n != 2 {
			t.Fatalf("%d labels for the two fields", n)
		}
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.SendKeys(chromedp.CSS("#email"), "owner@maple.example"),
			chromedp.SendKeys(chromedp.CSS("#password"), "not the password"),
			chromedp.Click(chromedp.CSS("button[type=submit]")),
			chromedp.WaitVisible(chromedp.CSS("[role=alert]")),
		)
		if msg := browsertest.Eval[string](t, ctx, `document.querySelector('[role=alert]').textContent`); msg != "The e-mail or password is wrong." {
			t.Fatalf("announced error: %q", msg)
		}
		// The right password, submitted from the keyboard.
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.SendKeys(chromedp.CSS("#password"), pw+"\r"),
			chromedp.WaitVisible(chromedp.CSS("nav")),
		)
		if h := browsertest.Eval[string](t, ctx, `document.querySelector('h1').textContent`); h != "Maple & Birch Goods" {
			t.Fatalf("home heading %q", h)
		}
		if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
			t.Fatalf("the home page is %d px wide at 375", w)
		}
		if bg := browsertest.Eval[string](t, ctx, `getComputedStyle(document.querySelector('header')).display`); bg != "flex" {
			t.Fatalf("the page's style did not apply: header display %s", bg)
		}
		// Tab reaches the test-mode banner's link (the shop is on the simulator), then the menu, closed
		// at this width with the navigation's links hidden; Enter opens it, and Tab goes through the
		// links in order (the current page marked), the search box (by its label), then sign-out.
		tab := func(n int) string {
			t.Helper()
			var focused []string
			for range n {
				browsertest.Step(t, ctx, 10*time.Second, chromedp.KeyEvent("\t"))
				focused = append(focused, browsertest.Eval[string](t, ctx, `(e => e.textContent.trim() || (e.labels && e.labels[0] ? e.labels[0].textContent.trim() : ''))(document.activeElement)`))
			}
			return strings.Join(focused, ", ")
		}
		if got := tab(2); got != "Connect an acquirer, Menu" {
			t.Fatalf("keyboard focus went %q", got)
		}
		if shown := browsertest.Eval[int](t, ctx, `[...document.querySelectorAll('nav[aria-label=Dashboard] a')].filter(a => a.checkVisibility()).length`); shown != 0 {
			t.Fatalf("%d links of the closed menu are shown at 375 px", shown)
		}
		browsertest.Step(t, ctx, 10*time.Second, chromedp.KeyEvent("\r"))
		if got := tab(15); got != "Home, Transactions, Terminal, Customers, Billing, Invoices, Payments API, Webhooks, Events, Activity, eCommerce, Staff, Account, "+
			"Search by ID, order, card last 4, e-mail, name or invoice number, Sign out" {
			t.Fatalf("keyboard focus through the open menu went %q", got)
		}
		if cur := browsertest.Eval[string](t, ctx, `document.querySelector('nav[aria-label=Dashboard] [aria-current=page]').textContent`); cur != "Home" {
			t.Fatalf("the current page in the navigation: %q", cur)
		}
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.KeyEvent("\r"),
			chromedp.WaitVisible(chromedp.CSS("#email")),
		)
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Navigate(s.srv.URL+"/dashboard"),
			chromedp.WaitVisible(chromedp.CSS("#email")),
		)
		if u := browsertest.Eval[string](t, ctx, `location.pathname`); u != "/dashboard/sign-in" {
			t.Fatalf("after sign-out, /dashboard showed %s", u)
		}
	})
}

// In Chromium: two-factor set up from the account page with the key shown (the QR code drawn beside
// it), then a sign-in with a code computed by the test as an authenticator app would, and one with a
// recovery code.
func TestTwoFactorInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		ctx := browsertest.New(t)
		signIn := func(next string) { signInInBrowser(t, ctx, s.srv.URL, "admin@maple.example", pw, next) }
		signOut := func() {
			t.Helper()
			browsertest.Step(t, ctx, 30*time.Second,
				chromedp.Click(chromedp.CSS("header form button")),
				chromedp.WaitVisible(chromedp.CSS("#email")),
			)
		}
		signIn("nav")
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Navigate(s.srv.URL+"/dashboard/account"),
			chromedp.Click(chromedp.CSS(`a[href="/dashboard/account/two-factor/setup"]`)),
			chromedp.WaitVisible(chromedp.CSS("#totp-key")),
		)
		if w := browsertest.Eval[float64](t, ctx, `document.querySelector('.qr svg').getBoundingClientRect().width`); w < 150 {
			t.Fatalf("the QR code is drawn %v px wide", w)
		}
		secret := confirmInBrowser(t, ctx)
		codes := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('#recovery-codes code')].map(c => c.textContent)`)
		if len(codes) != 10 {
			t.Fatalf("recovery codes shown: %q", codes)
		}
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+"/dashboard"), chromedp.WaitVisible(chromedp.CSS("nav")))
		signOut()

		// The next step's code: the set-up used this one's.
		signIn("#code")
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.SendKeys(chromedp.CSS("#code"), totp.Code(secret, totp.Step(time.Now())+1)+"\r"),
			chromedp.WaitVisible(chromedp.CSS("nav")),
		)
		if p := browsertest.Eval[string](t, ctx, `location.pathname`); p != "/dashboard" {
			t.Fatalf("after the code: %s", p)
		}
		signOut()

		signIn("#code")
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.SendKeys(chromedp.CSS("#code"), codes[0]+"\r"),
			chromedp.WaitVisible(chromedp.CSS("#two-factor-status")),
		)
		if status := browsertest.Eval[string](t, ctx, `document.getElementById('two-factor-status').textContent`); !strings.Contains(status, "9 recovery codes left") {
			t.Fatalf("after a recovery code: %q", status)
		}
	})
}

// Every dashboard page, checked with axe-core in light and dark, at desktop and phone widths: no
// serious or critical violation, and form fields' borders at 3:1 (browsertest.CheckAccessibility).
func TestDashboardAccessible(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	s := newShop(t, db, server.Config{})
	ctx := browsertest.New(t)
	visit := func(path, wait, name string) {
		t.Helper()
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(wait)))
		browsertest.CheckAccessibilityEverywhere(t, ctx, name)
	}
	visit("/dashboard/sign-in", "#email", "sign-in")
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#email"), "owner@maple.example"),
		chromedp.SendKeys(chromedp.CSS("#password"), "wrong\r"),
		chromedp.WaitVisible(chromedp.CSS("[role=alert]")),
	)
	browsertest.CheckAccessibilityEverywhere(t, ctx, "sign-in, wrong password")
	visit("/dashboard/forgot", "#email", "forgot password")
	signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
	browsertest.CheckAccessibilityEverywhere(t, ctx, "home")
	testModeBannerShown(t, ctx)
	visit("/dashboard/staff", "#invite-email", "staff")
	visit("/dashboard/account", "#two-factor-status", "account")
	visit("/dashboard/activity", "#activity", "activity")
	visit("/dashboard/activity?action=session.start", ".chips", "activity, filtered")
	visit("/dashboard/search?q=nothing", "#search-empty", "search, nothing found")
	visit("/dashboard/settings/ecommerce", "#processor", "eCommerce settings")
	visit("/dashboard/settings/emails", "#emails-empty", "e-mails, none yet")
	if err := db.Write(context.Background(), func(tx *store.Tx) error {
		return billing.QueueReceipt(context.Background(), tx, s.merchantID, "ann@example.com", nil, billing.Receipt{Merchant: "Maple & Birch Goods",
			Amount: "CA$9.99", Card: "Visa •••• 4242", Date: "2027-01-05", TransactionID: "tr_1"}, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	visit("/dashboard/settings/emails", "#emails", "e-mails")
	browsertest.Step(t, ctx, 30*time.Second, chromedp.Click(chromedp.CSS(`#emails a[href^="/dashboard/settings/emails/"]`)), chromedp.WaitVisible(chromedp.CSS("#email-html")))
	browsertest.CheckAccessibilityEverywhere(t, ctx, "an e-mail's preview")
	visit("/dashboard/account/two-factor/setup", "#totp-key", "two-factor set-up")
	confirmInBrowser(t, ctx)
	browsertest.CheckAccessibilityEverywhere(t, ctx, "recovery codes")
	visit("/dashboard", "nav", "home again")
	browsertest.Step(t, ctx, 30*time.Second, chromedp.Click(chromedp.CSS("header form button")), chromedp.WaitVisible(chromedp.CSS("#email")))
	signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "#code")
	browsertest.CheckAccessibilityEverywhere(t, ctx, "two-factor code")
}

// testModeBannerShown checks the test-mode banner of the page ctx shows (a shop on the simulator),
// at Phone and at Desktop width, in light and in dark: the first thing on the page, whole within the
// screen's width, a landmark named "Test mode" whose text says so, its link underlined (not told by
// colour alone), and no axe-core violation of any impact in it.
func testModeBannerShown(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, w := range []browsertest.Width{browsertest.Phone, browsertest.Desktop} {
		browsertest.Viewport(t, ctx, w)
		for _, scheme := range []string{"light", "dark"} {
			browsertest.ColorScheme(t, ctx, scheme)
			got := browsertest.Eval[string](t, ctx, `(() => {
				const b = document.getElementById('test-mode'); if (!b) return 'no banner';
				const r = b.getBoundingClientRect(), a = b.querySelector('a');
				if (document.body.firstElementChild !== b) return 'not first on the page';
				if (r.top !== 0 || r.left < 0 || r.right > innerWidth || r.height < 16) return 'drawn at ' + JSON.stringify(r);
				if (document.documentElement.scrollWidth > innerWidth) return 'the page is ' + document.documentElement.scrollWidth + ' px wide';
				if (b.getAttribute('aria-label') !== 'Test mode' || !b.textContent.includes('Test mode')) return 'unnamed: ' + b.outerHTML;
				if (!a || !getComputedStyle(a).textDecorationLine.includes('underline')) return 'its link is not underlined';
				return 'ok';
			})()`)
			if got != "ok" {
				t.Errorf("the test-mode banner at %s, %s: %s", w.Name, scheme, got)
			}
			// No violation in the banner whatever its impact, minor ones included (a page is failed
			// only for serious ones).
			for _, v := range browsertest.Axe(t, ctx) {
				for _, target := range v.Targets {
					if strings.Contains(target, "test-mode") {
						t.Errorf("the test-mode banner at %s, %s: %s", w.Name, scheme, v)
					}
				}
			}
		}
	}
	browsertest.ColorScheme(t, ctx, "")
}

// In Chromium, the credential flows: an owner makes a client pair in Settings → eCommerce and
// reads its secret from the page (the copy button shown by the page's script); the pair gets a token
// with golang.org/x/oauth2's client credentials and takes a sale; revoked from the page, its token is
// refused. A payments-API key made on the page works against the v1 API. A partner's access, ended
// from the page, stops its token. The owner invites a reporting user, who accepts the invitation,
// signs in, and finds neither the settings in the navigation nor the page behind them.
func TestCredentialsInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		ctx := browsertest.New(t)
		signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS(`nav a[href="/dashboard/settings/ecommerce"]`)),
			chromedp.WaitVisible(chromedp.CSS("#validity")),
			chromedp.Click(chromedp.CSS(`form[action="/dashboard/settings/ecommerce/clients"] button`)),
			chromedp.WaitVisible(chromedp.CSS("#new-secret")),
		)
		id := browsertest.Eval[string](t, ctx, `document.getElementById('new-client-id').textContent`)
		secret := browsertest.Eval[string](t, ctx, `document.getElementById('new-secret').textContent`)
		if shown := browsertest.Eval[bool](t, ctx, `!document.querySelector('button[data-copy="new-secret"]').hidden`); !shown {
			t.Error("the copy button is not shown: the page's script did not run")
		}
		tok, err := (&clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: s.srv.URL + "/oauth/token"}).Token(context.Background())
		if err != nil {
			t.Fatalf("a token with the pair made in the browser: %v", err)
		}
		sale := func() int {
			t.Helper()
			body := `{"amount":"12.34","card_number":"` + cardtest.Visa + `","card_expiry_month":"12","card_expiry_year":"40","cvv2":"123"}`
			req, _ := http.NewRequest("POST", s.srv.URL+"/transaction-service/sale", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if st := sale(); st != http.StatusOK && st != http.StatusCreated {
			t.Fatalf("a sale with the pair's token: %d", st)
		}
		// The API's sale wrote no audit record: its ledger row is its record, which the Activity page
		// shows with its client, amount and outcome, linked to the transaction.
		var sales int
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM audit_log WHERE merchant_id = $1
			AND transaction_id IS NOT NULL`, s.merchantID).Scan(&sales); err != nil || sales != 0 {
			t.Errorf("%d audit records of money operations (%v), want none", sales, err)
		}
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS(`nav a[href="/dashboard/activity"]`)),
			chromedp.WaitVisible(chromedp.CSS("#activity")),
		)
		row := browsertest.Eval[string](t, ctx, `[...document.querySelectorAll('#activity tbody tr')].map(r => r.textContent).find(t => t.includes('sale')) || ''`)
		if !strings.Contains(row, "API client "+id) || !strings.Contains(row, "CA$12.34") || !strings.Contains(row, "approved") {
			t.Errorf("the API's sale on the Activity page: %q", row)
		}
		if link := browsertest.Eval[string](t, ctx, `(document.querySelector('#activity a[href^="/dashboard/transactions/"]') || {}).textContent || ''`); len(link) != 20 {
			t.Errorf("the sale's transaction is not linked: %q", link)
		}
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS(`nav a[href="/dashboard/settings/ecommerce"]`)),
			chromedp.WaitVisible(chromedp.CSS("#validity")),
		)
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS(`form[action="/dashboard/settings/ecommerce/clients/`+id+`/revoke"] button`)),
			chromedp.WaitNotPresent(chromedp.CSS(`form[action="/dashboard/settings/ecommerce/clients/`+id+`/revoke"]`)),
		)
		if st := sale(); st != http.StatusUnauthorized {
			t.Fatalf("a sale with the revoked pair's token: %d", st)
		}

		// A payments-API key, made with one permission ticked, works against the v1 API.
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS(`input[name=permission][value="payment_intents:read"]`)),
			chromedp.Click(chromedp.CSS(`form[action="/dashboard/settings/ecommerce/api-keys"] button`)),
			chromedp.WaitVisible(chromedp.CSS("#new-api-key")),
		)
		req, _ := http.NewRequest("GET", s.srv.URL+"/v1/payment-intents", nil)
		req.Header.Set("payments-api-key", browsertest.Eval[string](t, ctx, `document.getElementById('new-api-key').textContent`))
		req.Header.Set("payments-account", "acct_"+s.merchantID)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the v1 API with the key made in the browser: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}

		// A partner the merchant approved (the consent page's work, in-process) holds a token; ending its
		// access from the page stops it within the revocation poll.
		var p auth.PartnerCredentials
		if err := db.Write(context.Background(), func(tx *store.Tx) error {
			var err error
			p, err = auth.CreatePartner(context.Background(), tx, auth.NewPartner{Name: "Ledgerly", ImageURL: "https://ledgerly.example/logo.png",
				CallbackURIs: []string{"https://ledgerly.example/cb"}}, time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		areq, err := s.srv.Auth().ParseAuthorizationRequest(context.Background(), url.Values{"response_type": {"code"},
			"client_id": {p.ClientID}, "redirect_uri": {"https://ledgerly.example/cb"}, "scope": {"ecom"}})
		if err != nil {
			t.Fatal(err)
		}
		code, err := s.srv.Auth().Authorize(context.Background(), s.merchantID, areq)
		if err != nil {
			t.Fatal(err)
		}
		if tok, err = (&oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, RedirectURL: "https://ledgerly.example/cb",
			Endpoint: oauth2.Endpoint{TokenURL: s.srv.URL + "/oauth/token", AuthStyle: oauth2.AuthStyleInHeader}}).Exchange(context.Background(), code); err != nil {
			t.Fatal(err)
		}
		if st := sale(); st != http.StatusOK && st != http.StatusCreated {
			t.Fatalf("a sale with the partner's token: %d", st)
		}
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Navigate(s.srv.URL+"/dashboard/settings/ecommerce"),
			chromedp.Click(chromedp.CSS(`form[action="/dashboard/settings/ecommerce/partners/`+p.PartnerID+`/revoke"] button`)),
			chromedp.WaitNotPresent(chromedp.CSS(`form[action="/dashboard/settings/ecommerce/partners/`+p.PartnerID+`/revoke"]`)),
		)
		for start := time.Now(); sale() != http.StatusUnauthorized; time.Sleep(100 * time.Millisecond) {
			if time.Since(start) > 2*auth.DefaultRevocationPoll {
				t.Fatalf("the partner's token still works after %v", time.Since(start))
			}
		}

		// An invitation to a reporting user, e-mailed, accepted in the same browser.
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Navigate(s.srv.URL+"/dashboard/staff"),
			chromedp.WaitVisible(chromedp.CSS("#invite-email")),
			chromedp.SendKeys(chromedp.CSS("#invite-email"), "books@maple.example"),
			chromedp.SetValue(chromedp.CSS("#invite-role"), "reporting"),
			chromedp.Click(chromedp.CSS(`form[action="/dashboard/staff/invite"] button`)),
			chromedp.WaitVisible(chromedp.CSS(`[role=status]`)),
		)
		link := outboxLink(t, db, "books@maple.example")
		const chosen = "ledgers and balances"
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Click(chromedp.CSS("header form button")),
			chromedp.WaitVisible(chromedp.CSS("#email")),
			chromedp.Navigate(link),
			chromedp.WaitVisible(chromedp.CSS("#confirm")),
			chromedp.SendKeys(chromedp.CSS("#password"), chosen),
			chromedp.SendKeys(chromedp.CSS("#confirm"), chosen+"\r"),
			chromedp.WaitVisible(chromedp.CSS("#email")),
		)
		signInInBrowser(t, ctx, s.srv.URL, "books@maple.example", chosen, "nav")
		if nav := browsertest.Eval[string](t, ctx, `[...document.querySelectorAll('nav[aria-label=Dashboard] a')].map(a => a.textContent).join(', ')`); nav != "Home, Transactions, Customers, Billing, Invoices, Payments API, Webhooks, Events, Activity, Account" {
			t.Errorf("a reporting user's navigation: %q", nav)
		}
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Navigate(s.srv.URL+"/dashboard/settings/ecommerce"),
			chromedp.WaitVisible(chromedp.CSS("h1")),
		)
		if h := browsertest.Eval[string](t, ctx, `document.querySelector('h1').textContent + ' ' + document.querySelector('[role=alert]').textContent`); !strings.Contains(h, "Not allowed") {
			t.Errorf("a reporting user at the settings: %q", h)
		}
	})
}

// In Chromium, with the server's clock the test's: a form on another site that posts to the dashboard,
// submitted by a signed-in browser, is refused for its origin (the browser also withholds the
// SameSite=Lax session cookie from it; the refusal does not depend on that); and a session left idle
// for 30 minutes sends the browser back to sign in.
func TestIdleExpiryAndCrossSiteFormInBrowser(t *testing.T) {
	t.Parallel()
	storetest.InBrowser(t, func(t *testing.T, db *store.DB) {
		clk := &clock{t: time.Now()}
		s := newShop(t, db, server.Config{Now: clk.Now})
		ctx := browsertest.New(t)
		signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
		// Another site's page with a form aimed at the dashboard.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><html lang="en"><title>Prize</title><form method="post" action="%s/dashboard/staff/invite">
<input name="email" value="mallory@evil.example"><input name="role" value="owner"><button id="go">Claim</button></form>`, s.srv.URL)
		}))
		defer evil.Close()
		evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1) // another origin than Kassa's 127.0.0.1
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Navigate(evilURL),
			chromedp.WaitVisible(chromedp.CSS("#go")),
			chromedp.Click(chromedp.CSS("#go")),
			chromedp.WaitVisible(chromedp.CSS("[role=alert]")),
		)
		if msg := browsertest.Eval[string](t, ctx, `document.querySelector('[role=alert]').textContent`); !strings.Contains(msg, "sent from another site") {
			t.Fatalf("the cross-site form's answer: %q", msg)
		}
		var n int
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM users WHERE email_key = 'mallory@evil.example'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("the cross-site form made %d users (%v)", n, err)
		}

		clk.Add(29 * time.Minute)
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+"/dashboard"), chromedp.WaitVisible(chromedp.CSS("nav")))
		clk.Add(30 * time.Minute)
		browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+"/dashboard"), chromedp.WaitVisible(chromedp.CSS("#email")))
		if u := browsertest.Eval[string](t, ctx, `location.pathname`); u != "/dashboard/sign-in" {
			t.Fatalf("after 30 idle minutes the dashboard showed %s", u)
		}
	})
}

// signInInBrowser signs in from the sign-in page at base as email, and waits for wait: the navigation
// of a signed-in page, or the next step of the sign-in.
func signInInBrowser(t *testing.T, ctx context.Context, base, email, password, wait string) {
	t.Helper()
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Navigate(base+"/dashboard/sign-in"),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#password"), password+"\r"),
		chromedp.WaitVisible(chromedp.CSS(wait)),
	)
}

// confirmInBrowser reads the key of the two-factor set-up page the browser shows, types the code an
// app would compute from it, and returns the secret once the recovery codes show.
func confirmInBrowser(t *testing.T, ctx context.Context) totp.Secret {
	t.Helper()
	secret, err := totp.ParseSecret(browsertest.Eval[string](t, ctx, `document.getElementById('totp-key').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#code"), totp.Code(secret, totp.Step(time.Now()))+"\r"),
		chromedp.WaitVisible(chromedp.CSS("#recovery-codes")),
	)
	return secret
}
