package signin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/merchant"
	passwords "github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

func TestMain(m *testing.M) { os.Exit(browsertest.Main(m)) }

const password = "a long passphrase"

// fixture is a running Kassa with a partner and a merchant who can sign in.
type fixture struct {
	srv      *servertest.Server
	partner  auth.PartnerCredentials
	merchant merchant.Merchant
	callback string
}

func newFixture(t *testing.T, db *store.DB, callback string) *fixture {
	t.Helper()
	return newFixtureWith(t, db, callback, server.Config{})
}

// newFixtureWith is newFixture with a server configured by cfg.
func newFixtureWith(t *testing.T, db *store.DB, callback string, cfg server.Config) *fixture {
	t.Helper()
	f := &fixture{srv: servertest.Start(t, db, cfg), callback: callback}
	f.partner = f.newPartner(t, callback)
	f.merchant = f.newMerchant(t, "owner@example.com")
	return f
}

func (f *fixture) newPartner(t *testing.T, callback string) auth.PartnerCredentials {
	t.Helper()
	var p auth.PartnerCredentials
	err := f.srv.DB.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		p, err = auth.CreatePartner(context.Background(), tx, auth.NewPartner{Name: "Books & Co", ImageURL: "https://partner.example/logo.png",
			CallbackURIs: []string{callback}}, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) newMerchant(t *testing.T, email string) merchant.Merchant {
	t.Helper()
	var m merchant.Merchant
	hash, err := user.HashPassword(context.Background(), passwords.NewGate(passwords.GateConfig{}), password)
	if err != nil {
		t.Fatal(err)
	}
	err = f.srv.DB.Write(context.Background(), func(tx *store.Tx) error {
		m, _, err = user.CreateMerchant(context.Background(), tx, merchant.New{Name: "Maple Goods", Email: email}, hash, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) authorizeURL(extra ...string) string {
	q := url.Values{"response_type": {"code"}, "client_id": {f.partner.ClientID}, "redirect_uri": {f.callback}, "state": {"st-7"}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return f.srv.URL + "/oauth/authorize?" + q.Encode()
}

type page struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, c *http.Client, method, u string, form url.Values, hdr ...string) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{resp.StatusCode, resp.Header, string(b)}
}

// Every page is locked down: a strict CSP without script, never framed, not cached.
func checkHeaders(t *testing.T, p page) {
	t.Helper()
	csp := p.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'", "style-src 'nonce-"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe-inline") || strings.Contains(p.body, "<script") {
		t.Errorf("the page allows or carries script: %q", csp)
	}
	if p.header.Get("X-Frame-Options") != "DENY" || p.header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", p.header)
	}
}

// The pages over plain HTTP, as a browser without JavaScript would use them: the sign-in page, a
// wrong password announced, the consent page, approve and deny, and every way a request is refused.
func TestAuthorizationPages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, "https://partner.example/callback")
		c := signintest.Client()

		signIn := do(t, c, "GET", f.authorizeURL(), nil)
		checkHeaders(t, signIn)
		for _, want := range []string{`<html lang="en">`, `<label for="email">`, `<label for="password">`, `autocomplete="username"`,
			`autocomplete="current-password"`, `action="/oauth/authorize/sign-in"`, "Books &amp; Co"} {
			if !strings.Contains(signIn.body, want) {
				t.Errorf("sign-in page lacks %s", want)
			}
		}
		request := signintest.Field(t, signIn.body, "request")

		wrong := do(t, c, "POST", f.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"owner@example.com"},
			"password": {"not it at all"}})
		if wrong.status != 401 || !strings.Contains(wrong.body, `role="alert"`) || !strings.Contains(wrong.body, `aria-invalid="true"`) ||
			!strings.Contains(wrong.body, "The e-mail or password is wrong.") || len(c.Jar.Cookies(mustURL(f.srv.URL+"/oauth/authorize"))) != 0 {
			t.Fatalf("wrong password: %d %s", wrong.status, wrong.body)
		}
		// An e-mail that no database could hold (PostgreSQL refuses a NUL) is a wrong e-mail, not a 500,
		// and an authorization request naming such a client is an unknown application.
		if p := do(t, c, "POST", f.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"owner\x00@example.com"},
			"password": {password}}); p.status != 401 || !strings.Contains(p.body, "The e-mail or password is wrong.") {
			t.Fatalf("NUL in the e-mail: %d %s", p.status, p.body)
		}
		if p := do(t, c, "GET", f.srv.URL+"/oauth/authorize?response_type=code&client_id=%00", nil); p.status != 400 {
			t.Fatalf("NUL in the client id: %d %s", p.status, p.body)
		}
		// A post from another site is refused before the password is looked at.
		if p := do(t, c, "POST", f.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"owner@example.com"},
			"password": {password}}, "Sec-Fetch-Site", "cross-site"); p.status != 403 {
			t.Fatalf("cross-site sign-in: %d", p.status)
		}

		ok := do(t, c, "POST", f.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"OWNER@example.com"},
			"password": {password}})
		if ok.status != 303 || ok.header.Get("Location") != "/oauth/authorize?"+request {
			t.Fatalf("sign-in: %d %v", ok.status, ok.header)
		}
		var cookie string
		for _, c := range ok.header.Values("Set-Cookie") {
			if strings.HasPrefix(c, "kassa_signin=") {
				cookie = c
			}
		}
		for _, want := range []string{"HttpOnly", "SameSite=Lax", "Path=/oauth/authorize"} {
			if !strings.Contains(cookie, want) {
				t.Errorf("session cookie %q lacks %s", cookie, want)
			}
		}

		consent := do(t, c, "GET", f.srv.URL+ok.header.Get("Location"), nil)
		checkHeaders(t, consent)
		for _, want := range []string{"Books &amp; Co wants access", `src="https://partner.example/logo.png"`, `alt="Books &amp; Co logo"`,
			"<strong>ecom</strong>", "<strong>invoice</strong>", `name="decision" value="approve"`, `name="decision" value="deny"`, "Maple Goods"} {
			if !strings.Contains(consent.body, want) {
				t.Errorf("consent page lacks %s", want)
			}
		}
		if csp := consent.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' https://partner.example") ||
			!strings.Contains(csp, "img-src https://partner.example") {
			t.Errorf("consent CSP %q must allow the callback's origin for the form and the partner's image", csp)
		}
		csrf := signintest.Field(t, consent.body, "csrf_token")
		decide := func(decision, token string) page {
			return do(t, c, "POST", f.srv.URL+"/oauth/authorize/decision", url.Values{"request": {request}, "csrf_token": {token},
				"decision": {decision}})
		}
		if p := decide("approve", "forged"); p.status != 403 || p.header.Get("Location") != "" {
			t.Fatalf("a forged CSRF token: %d %v", p.status, p.header)
		}
		approve := decide("approve", csrf)
		loc, _ := url.Parse(approve.header.Get("Location"))
		if approve.status != 303 || loc == nil || loc.Scheme+"://"+loc.Host+loc.Path != f.callback || loc.Query().Get("state") != "st-7" ||
			len(loc.Query().Get("code")) != 43 {
			t.Fatalf("approve: %d %v", approve.status, approve.header)
		}
		// The code works at the token endpoint with the partner's client.
		tok := exchange(t, f, loc.Query().Get("code"))
		if tok["merchant_id"] != f.merchant.ID {
			t.Fatalf("exchange: %v", tok)
		}
		deny := decide("deny", csrf)
		loc, _ = url.Parse(deny.header.Get("Location"))
		if deny.status != 303 || loc.Query().Get("error") != "access_denied" || loc.Query().Get("state") != "st-7" || loc.Query().Has("code") {
			t.Fatalf("deny: %d %v", deny.status, deny.header)
		}

		// An unknown client or an unregistered redirect URI: an error page, never a redirect.
		for _, u := range []string{f.authorizeURL("client_id", "0123456789abcdef0123456789abcdef"),
			f.authorizeURL("redirect_uri", "https://evil.example/callback")} {
			p := do(t, c, "GET", u, nil)
			if p.status != 400 || p.header.Get("Location") != "" || !strings.Contains(p.body, `role="alert"`) {
				t.Errorf("%s: %d %v", u, p.status, p.header)
			}
			checkHeaders(t, p)
		}
		// Other faults go back to the callback with the state.
		p := do(t, c, "GET", f.authorizeURL("response_type", "token"), nil)
		if loc, _ := url.Parse(p.header.Get("Location")); p.status != 303 || loc.Query().Get("error") != "unsupported_response_type" ||
			loc.Query().Get("state") != "st-7" {
			t.Fatalf("response_type=token: %d %v", p.status, p.header)
		}
	})
}

func mustURL(s string) *url.URL {
	u, _ := url.Parse(s)
	return u
}

// exchange trades a code for tokens as the spec sends it: query parameters and Basic auth.
func exchange(t *testing.T, f *fixture, code string) map[string]any {
	t.Helper()
	q := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {f.callback}}
	req, _ := http.NewRequest("POST", f.srv.URL+"/oauth/token?"+q.Encode(), nil)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(f.partner.ClientID, f.partner.ClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := decode(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("exchange: %d %v", resp.StatusCode, out)
	}
	return out
}

func decode(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return out
}

// approveOverHTTP signs the merchant with email in, approves the partner, and exchanges the code.
func approveOverHTTP(t *testing.T, f *fixture, email string) map[string]any {
	t.Helper()
	return exchange(t, f, signintest.Approve(t, f.srv.URL, f.authorizeURL(), email, password))
}

// bearer calls the gateway API with a token and decodes the answer.
func bearer(t *testing.T, f *fixture, tok any, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok.(string))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, decode(t, resp)
}

// A partner holding tokens for two merchants reaches each merchant's data only with that merchant's
// token.
func TestPartnerTokensForTwoMerchants(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, "https://partner.example/callback")
		other := f.newMerchant(t, "second@example.com")
		a, b := approveOverHTTP(t, f, "owner@example.com"), approveOverHTTP(t, f, "second@example.com")
		if a["merchant_id"] != f.merchant.ID || b["merchant_id"] != other.ID {
			t.Fatalf("merchant ids %v and %v", a["merchant_id"], b["merchant_id"])
		}
		status, customer := bearer(t, f, a["access_token"], "POST", "/customer-service/customer", `{"email":"buyer@example.com"}`)
		if status != 200 {
			t.Fatalf("create a customer with A's token: %d %v", status, customer)
		}
		status, sale := bearer(t, f, a["access_token"], "POST", "/transaction-service/sale",
			`{"amount":"5.00","currency":"CAD","card_number":"4242424242424242","card_expiry_month":"12","card_expiry_year":"40","cvv2":"123"}`)
		if status != 200 || sale["transaction_result"] != "APPROVED" {
			t.Fatalf("a sale with A's token: %d %v", status, sale)
		}
		customerPath := "/customer-service/customer/" + customer["lookup_id"].(string)
		salePath := "/transaction-service/transaction/" + sale["transaction_id"].(string)
		for _, path := range []string{customerPath, salePath} {
			if status, _ := bearer(t, f, b["access_token"], "GET", path, ""); status != 404 {
				t.Errorf("B's token reads A's %s: %d, want 404", path, status)
			}
			if status, _ := bearer(t, f, a["access_token"], "GET", path, ""); status != 200 {
				t.Errorf("A's token reads A's %s: %d", path, status)
			}
		}
		if _, list := bearer(t, f, b["access_token"], "GET", "/transaction-service/transaction", ""); len(list["entities"].([]any)) != 0 {
			t.Errorf("B's list shows A's transactions: %v", list)
		}
	})
}

// Served over https, the session cookie is Secure too.
func TestSessionCookieIsSecureOverHTTPS(t *testing.T) {
	t.Parallel()
	f := &fixture{srv: servertest.Start(t, storetest.SQLite(t), server.Config{PublicURL: "https://pay.example"}), callback: "https://partner.example/cb"}
	f.partner = f.newPartner(t, f.callback)
	f.merchant = f.newMerchant(t, "secure@example.com")
	c := signintest.Client()
	request := signintest.Field(t, do(t, c, "GET", f.authorizeURL(), nil).body, "request")
	p := do(t, c, "POST", f.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"secure@example.com"}, "password": {password}})
	if cookie := p.header.Get("Set-Cookie"); p.status != 303 || !strings.Contains(cookie, "; Secure") || !strings.Contains(cookie, "HttpOnly") {
		t.Fatalf("sign-in over https: %d, cookie %q", p.status, cookie)
	}
}

// A partner that asks only for invoice: the consent page describes truthfully what the scope gives
// (the invoice service), the token answers scope "invoice" as one string, and the token —
// and every token refreshed from it — reaches the invoice service and is refused by the gateway API's
// sale, customer and plan routes with 403 insufficient_scope.
func TestInvoiceOnlyApproval(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, "https://partner.example/callback")
		c := signintest.Client()
		authURL := f.authorizeURL("scope", "invoice")
		request := signintest.Field(t, do(t, c, "GET", authURL, nil).body, "request")
		if p := do(t, c, "POST", f.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"owner@example.com"},
			"password": {password}}); p.status != 303 {
			t.Fatalf("sign-in: %d", p.status)
		}
		consent := do(t, c, "GET", authURL, nil)
		if !strings.Contains(consent.body, "<strong>invoice</strong>: create, send, read, change, cancel and delete your invoices") ||
			!strings.Contains(consent.body, "e-mails your customers invoices with a link to pay them") ||
			strings.Contains(consent.body, "Kassa has no invoices") || strings.Contains(consent.body, "<strong>ecom</strong>") {
			t.Fatalf("the consent page does not describe invoice truthfully:\n%s", consent.body)
		}
		// Asked for everything, the page describes ecom as what it is: payments, on both APIs.
		if all := do(t, c, "GET", f.authorizeURL(), nil); !strings.Contains(all.body, "<strong>ecom</strong>: take card payments for you") ||
			!strings.Contains(all.body, "the payments API") {
			t.Fatalf("the consent page's ecom:\n%s", all.body)
		}
		resp, err := c.PostForm(f.srv.URL+"/oauth/authorize/decision", url.Values{"request": {request},
			"csrf_token": {signintest.Field(t, consent.body, "csrf_token")}, "decision": {"approve"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		tok := exchange(t, f, loc.Query().Get("code"))
		if scope, ok := tok["scope"].(string); !ok || scope != "invoice" {
			t.Fatalf("scope %#v, want the string \"invoice\"", tok["scope"])
		}

		refused := func(access any) {
			t.Helper()
			for _, call := range []struct{ method, path, body string }{
				{"POST", "/transaction-service/sale", `{"amount":"5.00","card_number":"4242424242424242","card_expiry_month":"12","card_expiry_year":"40","cvv2":"123"}`},
				{"POST", "/customer-service/customer", `{"email":"buyer@example.com"}`},
				{"GET", "/customer-service/customer", ""},
				{"POST", "/plan-service/plan", `{"name":"Monthly","amount":"9.99","frequency":"MONTHLY"}`},
				{"GET", "/plan-service/plan", ""},
			} {
				status, body := bearer(t, f, access, call.method, call.path, call.body)
				if status != 403 || body["error"] != "insufficient_scope" {
					t.Errorf("%s %s with an invoice-only token: %d %v", call.method, call.path, status, body)
				}
			}
		}
		refused(tok["access_token"])
		if status, body := bearer(t, f, tok["access_token"], "POST", "/invoice-service/invoice",
			`{"invoice_number":"A-1","items":[{"description":"Consulting","quantity":2,"unit_price":"50.00"}]}`); status != 200 ||
			body["total_amount"] != 100.0 || body["status"] != "DRAFT" {
			t.Fatalf("an invoice-only token creating an invoice: %d %v", status, body)
		}

		// A refresh keeps the approved scope, and cannot widen it (RFC 6749 §6).
		refresh := func(extra url.Values) (int, map[string]any) {
			q := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)},
				"client_id": {f.partner.ClientID}, "client_secret": {f.partner.ClientSecret}}
			for k, v := range extra {
				q[k] = v
			}
			resp, err := http.PostForm(f.srv.URL+"/oauth/token", q)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			return resp.StatusCode, decode(t, resp)
		}
		if status, body := refresh(url.Values{"scope": {"ecom"}}); status != 400 || body["error"] != "invalid_scope" {
			t.Fatalf("a refresh asking for ecom: %d %v", status, body)
		}
		status, refreshed := refresh(nil)
		if status != 200 || refreshed["scope"] != "invoice" {
			t.Fatalf("refresh: %d %v", status, refreshed)
		}
		refused(refreshed["access_token"])
		var customers int
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM customers WHERE merchant_id = $1`, f.merchant.ID).
			Scan(&customers); err != nil || customers != 0 {
			t.Fatalf("%d customers after the refusals (%v)", customers, err)
		}
	})
}

// The origins of a partner's image and callback go into the consent page's Content-Security-Policy
// rebuilt from their parsed scheme, host and port, never as stored: a partner recorded before
// creation checked its URLs, with a ";" or a quote in a host, cannot add a directive or a source.
func TestConsentCSPRebuildsPartnerOrigins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		callback := "https://partner.example;script-src/callback"
		f := newFixture(t, db, "https://partner.example/callback")
		f.callback = callback
		if _, err := db.Raw().ExecContext(context.Background(), `UPDATE partners SET image_url = $1, callback_uris = $2 WHERE id = $3`,
			`https://partner.example'unsafe-inline'"/logo.png`, callback, f.partner.PartnerID); err != nil {
			t.Fatal(err)
		}
		c := signintest.Client()
		request := signintest.Field(t, do(t, c, "GET", f.authorizeURL(), nil).body, "request")
		do(t, c, "POST", f.srv.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"owner@example.com"}, "password": {password}})
		consent := do(t, c, "GET", f.authorizeURL(), nil)
		if consent.status != 200 || !strings.Contains(consent.body, "wants access") {
			t.Fatalf("consent page: %d %s", consent.status, consent.body)
		}
		checkHeaders(t, consent)
		csp := consent.header.Get("Content-Security-Policy")
		if strings.Contains(csp, "script-src") || strings.Contains(csp, "unsafe") || strings.Contains(csp, `"`) ||
			strings.Count(csp, ";") != 5 || !strings.Contains(csp, "img-src 'none';") || !strings.Contains(csp, "form-action 'self';") {
			t.Fatalf("CSP %q", csp)
		}

		// Well-formed URLs are rebuilt, not copied: scheme and host in lower case, the port kept.
		if _, err := db.Raw().ExecContext(context.Background(), `UPDATE partners SET image_url = $1 WHERE id = $2`,
			"HTTPS://CDN.Partner.Example:8443/Logo.png", f.partner.PartnerID); err != nil {
			t.Fatal(err)
		}
		if csp := do(t, c, "GET", f.authorizeURL(), nil).header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src https://cdn.partner.example:8443;") {
			t.Fatalf("CSP %q", csp)
		}
	})
}
