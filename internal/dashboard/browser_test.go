package dashboard_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store/storetest"
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
	// Tab reaches the navigation's first link, then Staff, then sign-out.
	var focused []string
	for range 3 {
		browsertest.Step(t, ctx, 10*time.Second, chromedp.KeyEvent("\t"))
		focused = append(focused, browsertest.Eval[string](t, ctx, `document.activeElement.textContent.trim()`))
	}
	if focused[0] != "Home" || focused[1] != "Staff" || focused[2] != "Sign out" {
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
