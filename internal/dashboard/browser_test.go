package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/totp"
)

// In headless Chromium, at a phone's width: a browser that opens Kassa's address lands on the sign-in
// page; a wrong password is announced, the right one reaches the home page (the nonce'd stylesheet
// applied, the navigation reached by keyboard), and sign-out returns to the sign-in page, after
// which the dashboard asks for a sign-in again.
func TestSignInInBrowser(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{})
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
	// Tab reaches the navigation's links in order, then sign-out.
	var focused []string
	for range 6 {
		browsertest.Step(t, ctx, 10*time.Second, chromedp.KeyEvent("\t"))
		focused = append(focused, browsertest.Eval[string](t, ctx, `document.activeElement.textContent.trim()`))
	}
	if strings.Join(focused, ", ") != "Home, Staff, Settings, Activity, Account, Sign out" {
		t.Fatalf("keyboard focus went %q", focused)
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
}

// In Chromium: two-factor set up from the account page with the key shown (the QR code drawn beside
// it), then a sign-in with a code computed by the test as an authenticator app would, and one with a
// recovery code.
func TestTwoFactorInBrowser(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{})
	ctx := browsertest.New(t)
	signIn := func(next string) {
		t.Helper()
		browsertest.Step(t, ctx, 30*time.Second,
			chromedp.Navigate(s.srv.URL+"/dashboard/sign-in"),
			chromedp.WaitVisible(chromedp.CSS("#email")),
			chromedp.SendKeys(chromedp.CSS("#email"), "admin@maple.example"),
			chromedp.SendKeys(chromedp.CSS("#password"), pw+"\r"),
			chromedp.WaitVisible(chromedp.CSS(next)),
		)
	}
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
	secret, err := totp.ParseSecret(browsertest.Eval[string](t, ctx, `document.getElementById('totp-key').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#code"), totp.Code(secret, totp.Step(time.Now()))+"\r"),
		chromedp.WaitVisible(chromedp.CSS("#recovery-codes")),
	)
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
}

// Every dashboard page, checked with axe-core in light and dark, at desktop and phone widths: no
// serious or critical violation, and form fields' borders at 3:1 (browsertest.CheckAccessibility).
func TestDashboardAccessible(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{})
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
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Navigate(s.srv.URL+"/dashboard/sign-in"),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), "owner@maple.example"),
		chromedp.SendKeys(chromedp.CSS("#password"), pw+"\r"),
		chromedp.WaitVisible(chromedp.CSS("nav")),
	)
	browsertest.CheckAccessibilityEverywhere(t, ctx, "home")
	visit("/dashboard/staff", "#invite-email", "staff")
	visit("/dashboard/account", "#two-factor-status", "account")
	visit("/dashboard/activity", "#activity", "activity")
	visit("/dashboard/settings/ecommerce", "#processor", "eCommerce settings")
	visit("/dashboard/account/two-factor/setup", "#totp-key", "two-factor set-up")
	secret, err := totp.ParseSecret(browsertest.Eval[string](t, ctx, `document.getElementById('totp-key').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#code"), totp.Code(secret, totp.Step(time.Now()))+"\r"),
		chromedp.WaitVisible(chromedp.CSS("#recovery-codes")),
	)
	browsertest.CheckAccessibilityEverywhere(t, ctx, "recovery codes")
	visit("/dashboard", "nav", "home again")
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Click(chromedp.CSS("header form button")),
		chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), "owner@maple.example"),
		chromedp.SendKeys(chromedp.CSS("#password"), pw+"\r"),
		chromedp.WaitVisible(chromedp.CSS("#code")),
	)
	browsertest.CheckAccessibilityEverywhere(t, ctx, "two-factor code")
}
