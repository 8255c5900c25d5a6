package signin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// callbackServer is the partner's callback, on another origin than Kassa: it records each query it
// receives.
type callbackServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []url.Values
}

func newCallbackServer(t *testing.T) *callbackServer {
	cb := &callbackServer{}
	cb.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r) // the browser's favicon request
			return
		}
		cb.mu.Lock()
		cb.hits = append(cb.hits, r.URL.Query())
		cb.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!doctype html><title>Partner</title><p id="back">Back at the partner</p>`))
	}))
	t.Cleanup(cb.Close)
	return cb
}

func (cb *callbackServer) last(t *testing.T) url.Values {
	t.Helper()
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if len(cb.hits) == 0 {
		t.Fatal("the callback was never called")
	}
	return cb.hits[len(cb.hits)-1]
}

// The whole flow in headless Chromium: the partner's authorization URL (golang.org/x/oauth2, with
// PKCE), the sign-in page with a wrong then the right password, the consent page, approve, and the
// redirect to the partner's callback on another port; then the code is exchanged, the token source
// refreshes, and the token reaches the merchant's data. A second visit, signed in, denies.
func TestAuthorizationFlowInBrowser(t *testing.T) {
	t.Parallel()
	cb := newCallbackServer(t)
	// The callback listens on 127.0.0.1 too, on its own port: another origin than Kassa.
	f := newFixture(t, storetest.SQLite(t), cb.URL+"/callback")
	cfg := oauth2.Config{ClientID: f.partner.ClientID, ClientSecret: f.partner.ClientSecret, RedirectURL: f.callback,
		Scopes: []string{"ecom", "invoice"}, Endpoint: oauth2.Endpoint{AuthURL: f.srv.URL + "/oauth/authorize", TokenURL: f.srv.URL + "/oauth/token"}}
	verifier := oauth2.GenerateVerifier()

	ctx := browsertest.New(t)
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Navigate(cfg.AuthCodeURL("state-in-browser", oauth2.S256ChallengeOption(verifier))),
		chromedp.WaitVisible(chromedp.CSS("#email")),
	)
	// The nonce'd stylesheet applied (the CSP let it through); every field has its label.
	if got := browsertest.Eval[string](t, ctx, `getComputedStyle(document.querySelector('main')).maxWidth`); got != "416px" {
		t.Fatalf("the page's style did not apply: max-width %s", got)
	}
	if n := browsertest.Eval[int](t, ctx, `document.getElementById('email').labels.length + document.getElementById('password').labels.length`); n != 2 {
		t.Fatalf("%d labels for the two fields", n)
	}
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#email"), "owner@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "not the password"),
		chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("[role=alert]")),
	)
	if msg := browsertest.Eval[string](t, ctx, `document.querySelector('[role=alert]').textContent`); msg != "The e-mail or password is wrong." {
		t.Fatalf("announced error: %q", msg)
	}
	if inv := browsertest.Eval[string](t, ctx, `document.getElementById('password').getAttribute('aria-invalid')`); inv != "true" {
		t.Fatalf("aria-invalid %q", inv)
	}
	// The page came back with the e-mail kept and the password field empty.
	if v := browsertest.Eval[string](t, ctx, `document.getElementById('email').value + '|' + document.getElementById('password').value`); v != "owner@example.com|" {
		t.Fatalf("fields after a failed sign-in: %q", v)
	}
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(`button[value=approve]`)),
	)
	if h := browsertest.Eval[string](t, ctx, `document.querySelector('h1').textContent`); h != "Books & Co wants access to your Kassa account" {
		t.Fatalf("consent heading %q", h)
	}
	if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('li').length`); n != 2 {
		t.Fatalf("%d scopes listed, want 2", n)
	}
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Click(chromedp.CSS(`button[value=approve]`)),
		chromedp.WaitVisible(chromedp.CSS("#back")),
	)
	got := cb.last(t)
	if got.Get("state") != "state-in-browser" || got.Get("code") == "" {
		t.Fatalf("the callback received %v", got)
	}

	tok, err := cfg.Exchange(context.Background(), got.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Extra("merchant_id") != f.merchant.ID || tok.RefreshToken == "" {
		t.Fatalf("token %+v", tok)
	}
	tok.Expiry = time.Now().Add(-time.Second) // let the source refresh before the first call
	ts := cfg.TokenSource(context.Background(), tok)
	client := oauth2.NewClient(context.Background(), ts)
	resp, err := client.Post(f.srv.URL+"/customer-service/customer", "application/json", strings.NewReader(`{"email":"buyer@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	var customer map[string]any
	json.NewDecoder(resp.Body).Decode(&customer)
	resp.Body.Close()
	if resp.StatusCode != 200 || customer["email"] != "buyer@example.com" {
		t.Fatalf("the partner creating the merchant's customer: %d %v", resp.StatusCode, customer)
	}
	if fresh, _ := ts.Token(); fresh.RefreshToken == tok.RefreshToken {
		t.Fatal("the token source did not refresh")
	}

	// Signed in already: the consent page comes at once; deny goes back with access_denied.
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Navigate(cfg.AuthCodeURL("second-visit")),
		chromedp.WaitVisible(chromedp.CSS(`button[value=deny]`)),
		chromedp.Click(chromedp.CSS(`button[value=deny]`)),
		chromedp.WaitVisible(chromedp.CSS("#back")),
	)
	if got := cb.last(t); got.Get("error") != "access_denied" || got.Get("state") != "second-visit" || got.Has("code") {
		t.Fatalf("deny: the callback received %v", got)
	}
}

// Every page of the flow passes axe-core, in light and in dark, at desktop width and at 375 px: the
// sign-in page, as it first comes and after a wrong password, the consent page, and the error page.
func TestPagesAccessible(t *testing.T) {
	t.Parallel()
	cb := newCallbackServer(t)
	f := newFixture(t, storetest.SQLite(t), cb.URL+"/callback")
	ctx := browsertest.New(t)
	browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(f.authorizeURL("scope", "ecom invoice")), chromedp.WaitVisible(chromedp.CSS("#email")))
	browsertest.CheckAccessibilityEverywhere(t, ctx, "sign-in page")

	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#email"), "owner@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "not the password"),
		chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("[role=alert]")),
	)
	browsertest.CheckAccessibilityEverywhere(t, ctx, "sign-in page after a wrong password")

	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(`button[value=approve]`)),
	)
	browsertest.CheckAccessibilityEverywhere(t, ctx, "consent page")

	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Navigate(f.srv.URL+"/oauth/authorize?response_type=code&client_id=nobody"),
		chromedp.WaitVisible(chromedp.CSS("[role=alert]")),
	)
	browsertest.CheckAccessibilityEverywhere(t, ctx, "error page")
}
