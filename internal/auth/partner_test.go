package auth_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

const callback = "https://partner.example/callback"

// newPartner registers a partner with the callback above (and validity, when not zero).
func (f *fixture) newPartner(t testing.TB, validity time.Duration) auth.PartnerCredentials {
	t.Helper()
	var p auth.PartnerCredentials
	err := f.db.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		p, err = auth.CreatePartner(context.Background(), tx, auth.NewPartner{Name: "Books Co", ImageURL: "https://partner.example/logo.png",
			CallbackURIs: []string{callback, "https://partner.example/other"}, TokenValidity: validity}, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newMerchantWithPassword creates a merchant who can sign in, with its own client.
func (f *fixture) newMerchantWithPassword(t *testing.T, email, pw string) auth.Credentials {
	t.Helper()
	var c auth.Credentials
	hash, err := user.HashPassword(context.Background(), password.NewGate(password.GateConfig{}), pw)
	if err != nil {
		t.Fatal(err)
	}
	err = f.db.Write(context.Background(), func(tx *store.Tx) error {
		m, _, err := user.CreateMerchant(context.Background(), tx, merchant.New{Name: "Shop", Email: email}, hash, time.Now())
		if err != nil {
			return err
		}
		c, err = auth.CreateClient(context.Background(), tx, m.ID, auth.DefaultValidity, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// approve is the browser's part of the flow, in-process: the authorization request q is checked, and
// the merchant approves it. It returns the code the redirect would carry.
func (f *fixture) approve(t *testing.T, merchantID string, q url.Values) string {
	t.Helper()
	req, err := f.svc.ParseAuthorizationRequest(context.Background(), q)
	if err != nil {
		t.Fatalf("authorization request %v: %v", q, err)
	}
	code, err := f.svc.Authorize(context.Background(), merchantID, req)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func authorizeQuery(p auth.PartnerCredentials, extra ...string) url.Values {
	q := url.Values{"response_type": {"code"}, "client_id": {p.ClientID}, "redirect_uri": {callback}, "state": {"s-1"}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return q
}

// token posts to the token endpoint with params in the query string (as the spec sends them) and
// returns the status and the JSON body.
func (f *fixture) token(t *testing.T, params url.Values, header http.Header) (int, map[string]any) {
	t.Helper()
	resp, body := f.post(t, params.Encode(), "application/x-www-form-urlencoded", nil, header)
	return resp.StatusCode, body
}

func (f *fixture) protectedStatus(t *testing.T, access any) int {
	t.Helper()
	s, _, _ := f.get(t, "Bearer "+access.(string))
	return s
}

func pkce(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// The exchange as the spec sends it — parameters in the query string, Basic auth — and in the form
// body; codes are single use, short-lived, and bound to the client, the redirect URI and the PKCE
// challenge; a second use of a code revokes what its first use issued (RFC 6749 §4.1.2).
func TestAuthorizationCodeGrant(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		p := f.newPartner(t, 0)
		other := f.newPartner(t, 0)
		m := f.creds
		pb := basic(p.ClientID, p.ClientSecret)
		exchange := func(code, redirect string, extra ...string) url.Values {
			v := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "state": {"s-1"}}
			for i := 0; i+1 < len(extra); i += 2 {
				v.Set(extra[i], extra[i+1])
			}
			return v
		}

		code := f.approve(t, m.MerchantID, authorizeQuery(p))
		status, tok := f.token(t, exchange(code, callback), pb)
		if status != 200 || tok["token_type"] != "Bearer" || tok["merchant_id"] != m.MerchantID || tok["scope"] != "ecom invoice" ||
			tok["expires_in"].(float64) != 1200 || !strings.HasPrefix(tok["refresh_token"].(string), "krt_") {
			t.Fatalf("exchange: %d %v", status, tok)
		}
		if s := f.protectedStatus(t, tok["access_token"]); s != 200 {
			t.Fatalf("the partner's token at a protected route: %d", s)
		}
		// A second use fails and revokes the tokens of the first.
		if status, body := f.token(t, exchange(code, callback), pb); status != 400 || body["error"] != "invalid_grant" {
			t.Fatalf("second use: %d %v", status, body)
		}
		if s := f.protectedStatus(t, tok["access_token"]); s != 401 {
			t.Fatalf("token of a reused code: %d, want 401", s)
		}
		if status, body := f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)},
			"client_id": {p.ClientID}, "client_secret": {p.ClientSecret}}, nil); status != 400 || body["error"] != "invalid_grant" {
			t.Fatalf("refresh token of a reused code: %d %v", status, body)
		}

		// The form body works too, with the client in parameters.
		code = f.approve(t, m.MerchantID, authorizeQuery(p, "scope", "ecom"))
		resp, body := f.post(t, "", "application/x-www-form-urlencoded", strings.NewReader(exchange(code, callback,
			"client_id", p.ClientID, "client_secret", p.ClientSecret).Encode()), nil)
		if resp.StatusCode != 200 || body["scope"] != "ecom" || body["merchant_id"] != m.MerchantID {
			t.Fatalf("exchange in the form body: %d %v", resp.StatusCode, body)
		}

		// Bound to client and redirect URI; refused to merchants' clients; short-lived.
		code = f.approve(t, m.MerchantID, authorizeQuery(p))
		for _, tc := range []struct {
			name   string
			params url.Values
			header http.Header
			code   string
		}{
			{"another partner's client", exchange(code, callback), basic(other.ClientID, other.ClientSecret), "invalid_grant"},
			{"another registered redirect_uri", exchange(code, "https://partner.example/other"), pb, "invalid_grant"},
			{"no redirect_uri", exchange(code, ""), pb, "invalid_grant"},
			{"a merchant's client", exchange(code, callback), basic(m.ClientID, m.ClientSecret), "unauthorized_client"},
			{"no code", exchange("", callback), pb, "invalid_request"},
			{"an unknown code", exchange("not-a-code", callback), pb, "invalid_grant"},
			{"a code_verifier without a challenge", exchange(code, callback, "code_verifier", strings.Repeat("v", 43)), pb, "invalid_grant"},
		} {
			if status, body := f.token(t, tc.params, tc.header); status != 400 || body["error"] != tc.code {
				t.Errorf("%s: %d %v, want 400 %s", tc.name, status, body, tc.code)
			}
		}
		// None of those spent it.
		if status, body := f.token(t, exchange(code, callback), pb); status != 200 {
			t.Fatalf("the code after refused attempts: %d %v", status, body)
		}
		code = f.approve(t, m.MerchantID, authorizeQuery(p))
		f.clock.Advance(61 * time.Second)
		if status, body := f.token(t, exchange(code, callback), pb); status != 400 || body["error"] != "invalid_grant" ||
			!strings.Contains(body["error_description"].(string), "expired") {
			t.Fatalf("a code after 61 s: %d %v", status, body)
		}

		// PKCE (RFC 7636): the verifier must match the S256 challenge.
		verifier := strings.Repeat("k", 50)
		code = f.approve(t, m.MerchantID, authorizeQuery(p, "code_challenge", pkce(verifier), "code_challenge_method", "S256"))
		for _, v := range []string{"", strings.Repeat("x", 50)} {
			if status, body := f.token(t, exchange(code, callback, "code_verifier", v), pb); status != 400 || body["error"] != "invalid_grant" {
				t.Fatalf("verifier %q: %d %v", v, status, body)
			}
		}
		if status, body := f.token(t, exchange(code, callback, "code_verifier", verifier), pb); status != 200 {
			t.Fatalf("the right verifier: %d %v", status, body)
		}
	})
}

// Faults of the client or the redirect URI are never redirected (RFC 6749 §4.1.2.1); the others are.
func TestAuthorizationRequestChecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t))
	p := f.newPartner(t, 0)
	for _, tc := range []struct {
		name     string
		q        url.Values
		redirect string // "" for a ClientError
	}{
		{"unknown client", authorizeQuery(auth.PartnerCredentials{ClientID: "0123456789abcdef0123456789abcdef"}), ""},
		{"a merchant's client", authorizeQuery(auth.PartnerCredentials{ClientID: f.creds.ClientID}), ""},
		{"unregistered redirect_uri", authorizeQuery(p, "redirect_uri", "https://evil.example/cb"), ""},
		{"redirect_uri differing in case", authorizeQuery(p, "redirect_uri", "https://partner.example/Callback"), ""},
		{"no redirect_uri with two registered", authorizeQuery(p, "redirect_uri", ""), ""},
		{"response_type token", authorizeQuery(p, "response_type", "token"), "unsupported_response_type"},
		{"unknown scope", authorizeQuery(p, "scope", "admin"), "invalid_scope"},
		{"plain PKCE", authorizeQuery(p, "code_challenge", strings.Repeat("a", 43), "code_challenge_method", "plain"), "invalid_request"},
		{"short challenge", authorizeQuery(p, "code_challenge", "abc", "code_challenge_method", "S256"), "invalid_request"},
	} {
		_, err := f.svc.ParseAuthorizationRequest(context.Background(), tc.q)
		var ce *auth.ClientError
		var re *auth.RedirectError
		switch {
		case tc.redirect == "" && !errorAs(err, &ce):
			t.Errorf("%s: %v, want a ClientError", tc.name, err)
		case tc.redirect != "" && (!errorAs(err, &re) || re.Code != tc.redirect):
			t.Errorf("%s: %v, want a RedirectError %s", tc.name, err, tc.redirect)
		}
	}
}

// golang.org/x/oauth2 drives the flow: AuthCodeURL with PKCE, Exchange, and a TokenSource that
// refreshes an expired token with the refresh grant and keeps the new refresh token.
func TestAuthorizationCodeWithOAuth2Client(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		p := f.newPartner(t, 0)
		cfg := oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, RedirectURL: callback, Scopes: []string{"ecom"},
			Endpoint: oauth2.Endpoint{AuthURL: f.srv.URL + "/oauth/authorize", TokenURL: f.srv.URL + "/oauth/token"}}
		verifier := oauth2.GenerateVerifier()
		u, err := url.Parse(cfg.AuthCodeURL("state-42", oauth2.S256ChallengeOption(verifier)))
		if err != nil {
			t.Fatal(err)
		}
		code := f.approve(t, f.creds.MerchantID, u.Query())
		ctx := context.Background()
		tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatal(err)
		}
		if tok.Extra("merchant_id") != f.creds.MerchantID || tok.Extra("scope") != "ecom" || tok.RefreshToken == "" {
			t.Fatalf("exchanged %+v", tok)
		}
		first := tok.RefreshToken
		tok.Expiry = time.Now().Add(-time.Minute) // the client thinks it has expired: the source refreshes
		ts := cfg.TokenSource(ctx, tok)
		fresh, err := ts.Token()
		if err != nil {
			t.Fatal(err)
		}
		if fresh.AccessToken == tok.AccessToken || fresh.RefreshToken == first || fresh.RefreshToken == "" ||
			fresh.Extra("merchant_id") != f.creds.MerchantID || fresh.Extra("scope") != "ecom" {
			t.Fatalf("refreshed %+v", fresh)
		}
		resp, err := oauth2.NewClient(ctx, ts).Get(f.srv.URL + "/protected")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("protected route with the refreshed token: %d", resp.StatusCode)
		}
	})
}

// The refresh grant as the spec sends it (parameters in the query string, client in parameters):
// a refresh token works once; a spent one used again revokes the whole grant (RFC 6819 §5.2.2.3);
// of concurrent refreshes with one token exactly one succeeds, and its tokens keep working.
func TestRefreshGrant(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		p := f.newPartner(t, 5*time.Minute)
		pb := basic(p.ClientID, p.ClientSecret)
		refresh := func(rt string) (int, map[string]any) {
			return f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {p.ClientID},
				"client_secret": {p.ClientSecret}}, nil)
		}
		code := f.approve(t, f.creds.MerchantID, authorizeQuery(p, "scope", "ecom"))
		_, first := f.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback}}, pb)
		status, second := refresh(first["refresh_token"].(string))
		if status != 200 || second["refresh_token"] == first["refresh_token"] || second["merchant_id"] != f.creds.MerchantID ||
			second["scope"] != "ecom" || second["expires_in"].(float64) != 300 {
			t.Fatalf("refresh: %d %v", status, second)
		}
		// Another client may not use it; a wider scope may not be asked.
		if status, body := f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {second["refresh_token"].(string)}},
			basic(f.creds.ClientID, f.creds.ClientSecret)); status != 400 || body["error"] != "invalid_grant" {
			t.Fatalf("a merchant's client with the partner's refresh token: %d %v", status, body)
		}
		if status, body := f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {second["refresh_token"].(string)},
			"scope": {"ecom invoice"}}, pb); status != 400 || body["error"] != "invalid_scope" {
			t.Fatalf("a wider scope: %d %v", status, body)
		}

		// Ten concurrent refreshes with one token: exactly one wins, and the grant stands.
		var wg sync.WaitGroup
		results := make(chan map[string]any, 10)
		for range 10 {
			wg.Go(func() {
				if status, body := refresh(second["refresh_token"].(string)); status == 200 {
					results <- body
				} else if body["error"] != "invalid_grant" {
					t.Errorf("a losing refresh: %d %v", status, body)
				}
			})
		}
		wg.Wait()
		close(results)
		var winners []map[string]any
		for r := range results {
			winners = append(winners, r)
		}
		if len(winners) != 1 {
			t.Fatalf("%d concurrent refreshes succeeded, want 1", len(winners))
		}
		third := winners[0]
		if s := f.protectedStatus(t, third["access_token"]); s != 200 {
			t.Fatalf("the winner's token: %d", s)
		}

		// A spent token used again later is a replay: the whole grant is revoked.
		f.clock.Advance(3 * time.Second)
		if status, body := refresh(second["refresh_token"].(string)); status != 400 || body["error"] != "invalid_grant" {
			t.Fatalf("replayed refresh token: %d %v", status, body)
		}
		if s := f.protectedStatus(t, third["access_token"]); s != 401 {
			t.Fatalf("access token after a replay: %d, want 401", s)
		}
		if status, body := refresh(third["refresh_token"].(string)); status != 400 || body["error"] != "invalid_grant" {
			t.Fatalf("the newest refresh token after a replay: %d %v", status, body)
		}
	})
}

// The password grant (gateway-api.md, Authentication rule 7): the merchant's e-mail and password
// in the body, with its own client; the same answer whatever is wrong; throttled per client.
func TestPasswordGrant(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		const pw = "a long passphrase"
		m := f.newMerchantWithPassword(t, "owner@example.com", pw)
		other := f.newMerchantWithPassword(t, "other@example.com", pw)
		p := f.newPartner(t, 0)
		mb := basic(m.ClientID, m.ClientSecret)
		status, tok := f.passwordGrant(t, "Owner@Example.com", pw, mb)
		if status != 200 || tok["merchant_id"] != m.MerchantID || tok["refresh_token"] == nil || tok["expires_in"].(float64) != 43200 {
			t.Fatalf("password grant: %d %v", status, tok)
		}
		if status, body := f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)}}, mb); status != 200 ||
			body["merchant_id"] != m.MerchantID {
			t.Fatalf("refreshing a password grant: %d %v", status, body)
		}
		// Wrong password, unknown e-mail, another merchant's client: one answer.
		_, wrong := f.passwordGrant(t, "owner@example.com", "not the passphrase", mb)
		_, unknown := f.passwordGrant(t, "nobody@example.com", pw, mb)
		_, foreign := f.passwordGrant(t, "owner@example.com", pw, basic(other.ClientID, other.ClientSecret))
		if wrong["error"] != "invalid_grant" || wrong["error_description"] != unknown["error_description"] ||
			wrong["error_description"] != foreign["error_description"] {
			t.Fatalf("answers differ: %v / %v / %v", wrong, unknown, foreign)
		}
		if status, body := f.passwordGrant(t, "owner@example.com", pw, basic(p.ClientID, p.ClientSecret)); status != 400 || body["error"] != "unauthorized_client" {
			t.Fatalf("a partner's client: %d %v", status, body)
		}

		// Five failures of one client refuse it for the rest of the 15-minute window that its first
		// failure opened, even with the right password, whatever the e-mail.
		for i := 2; i < auth.ClientAttemptLimit; i++ {
			if status, _ := f.passwordGrant(t, "ghost@example.com", "wrong wrong wrong", mb); status != 400 {
				t.Fatalf("failure %d: %d", i+1, status)
			}
		}
		resp, body := f.post(t, "", "application/x-www-form-urlencoded",
			strings.NewReader(url.Values{"grant_type": {"password"}, "username": {"owner@example.com"}, "password": {pw}}.Encode()), mb)
		if resp.StatusCode != 429 || body["error"] != "invalid_grant" || resp.Header.Get("Retry-After") != "900" {
			t.Fatalf("the right password from a refused client: %d %v Retry-After %q", resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
		// The count is the client's: the merchant's other client, and other merchants, sign in.
		var second auth.Credentials
		if err := f.db.Write(context.Background(), func(tx *store.Tx) (err error) {
			second, err = auth.CreateClient(context.Background(), tx, m.MerchantID, auth.DefaultValidity, time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if status, body := f.passwordGrant(t, "owner@example.com", pw, basic(second.ClientID, second.ClientSecret)); status != 200 {
			t.Fatalf("the merchant's second client: %d %v", status, body)
		}
		if status, _ := f.passwordGrant(t, "other@example.com", pw, basic(other.ClientID, other.ClientSecret)); status != 200 {
			t.Fatalf("another merchant: %d", status)
		}
		f.clock.Advance(auth.ThrottleWindow)
		if status, _ := f.passwordGrant(t, "owner@example.com", pw, mb); status != 200 {
			t.Fatalf("after the window: %d", status)
		}
		// A right password gives its attempt back: successes never fill the count.
		for range auth.ClientAttemptLimit + 1 {
			if status, _ := f.passwordGrant(t, "owner@example.com", pw, mb); status != 200 {
				t.Fatalf("repeated successful grants: %d", status)
			}
		}
	})
}

// Thirty guesses racing with one client get at most the limit's worth of password
// checks; the rest are refused unchecked. The count is reserved before the check, so the race
// cannot outrun it.
func TestPasswordGrantCountsBeforeChecking(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		m := f.newMerchantWithPassword(t, "racer@example.com", "a long passphrase")
		mb := basic(m.ClientID, m.ClientSecret)
		var mu sync.Mutex
		statuses := map[int]int{}
		var wg sync.WaitGroup
		for range 30 {
			wg.Go(func() {
				resp, _ := f.post(t, "", "application/x-www-form-urlencoded",
					strings.NewReader(url.Values{"grant_type": {"password"}, "username": {"racer@example.com"}, "password": {"wrong wrong wrong"}}.Encode()), mb)
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if statuses[400] < 1 || statuses[400] > auth.ClientAttemptLimit || statuses[400]+statuses[429] != 30 {
			t.Fatalf("30 racing guesses: %v; want at most %d checked (400), the rest 429", statuses, auth.ClientAttemptLimit)
		}
	})
}

// The password grant refuses its credentials in the query string, where they
// would be logged; the grants whose query-string form the contract requires keep it.
func TestPasswordGrantRefusesCredentialsInTheURL(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t))
	const pw = "a long passphrase"
	m := f.newMerchantWithPassword(t, "owner@example.com", pw)
	mb := basic(m.ClientID, m.ClientSecret)
	form := func(v url.Values) io.Reader { return strings.NewReader(v.Encode()) }
	for name, req := range map[string]struct {
		query, body url.Values
		header      http.Header
	}{
		"password in the query": {url.Values{"grant_type": {"password"}, "username": {"owner@example.com"}, "password": {pw}}, nil, mb},
		"client secret in the query": {url.Values{"client_id": {m.ClientID}, "client_secret": {m.ClientSecret}},
			url.Values{"grant_type": {"password"}, "username": {"owner@example.com"}, "password": {pw}}, nil},
		"grant type in the body, password in the query": {url.Values{"password": {pw}},
			url.Values{"grant_type": {"password"}, "username": {"owner@example.com"}}, mb},
	} {
		resp, body := f.post(t, req.query.Encode(), "application/x-www-form-urlencoded", form(req.body), req.header)
		if resp.StatusCode != 400 || body["error"] != "invalid_request" || !strings.Contains(body["error_description"].(string), "request body") {
			t.Errorf("%s: %d %v", name, resp.StatusCode, body)
		}
	}
	// In the body, with the client's parameters too, the same request succeeds; the username may
	// stay in the query.
	if resp, body := f.post(t, url.Values{"grant_type": {"password"}, "username": {"owner@example.com"}}.Encode(), "application/x-www-form-urlencoded",
		form(url.Values{"password": {pw}, "client_id": {m.ClientID}, "client_secret": {m.ClientSecret}}), nil); resp.StatusCode != 200 {
		t.Fatalf("password grant in the body: %d %v", resp.StatusCode, body)
	}

	// The query-string forms the contract requires: client credentials, the authorization code
	// exchange, and the refresh grant with the client's parameters.
	if status, body := f.token(t, url.Values{"grant_type": {"client_credentials"}, "client_id": {m.ClientID}, "client_secret": {m.ClientSecret}}, nil); status != 200 {
		t.Fatalf("client credentials in the query: %d %v", status, body)
	}
	p := f.newPartner(t, 0)
	code := f.approve(t, m.MerchantID, authorizeQuery(p))
	status, tok := f.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback},
		"client_id": {p.ClientID}, "client_secret": {p.ClientSecret}}, nil)
	if status != 200 {
		t.Fatalf("authorization code in the query: %d %v", status, tok)
	}
	if status, body := f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok["refresh_token"].(string)},
		"client_id": {p.ClientID}, "client_secret": {p.ClientSecret}}, nil); status != 200 {
		t.Fatalf("refresh in the query: %d %v", status, body)
	}
}

// passwordGrant asks for a token with the password grant, its parameters in the body.
func (f *fixture) passwordGrant(t *testing.T, user, pw string, header http.Header) (int, map[string]any) {
	t.Helper()
	resp, body := f.post(t, "", "application/x-www-form-urlencoded",
		strings.NewReader(url.Values{"grant_type": {"password"}, "username": {user}, "password": {pw}}.Encode()), header)
	return resp.StatusCode, body
}

// DELETE /oauth/revoke_token and RFC 7009 POST /oauth/revoke; kassa merchant revoke-partner's
// RevokePartner ends a partner's access to one merchant on every node.
func TestRevocation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		p := f.newPartner(t, 0)
		other := f.newPartner(t, 0)
		pb := basic(p.ClientID, p.ClientSecret)
		tokens := func(partner auth.PartnerCredentials, merchantID string) map[string]any {
			code := f.approve(t, merchantID, authorizeQuery(partner))
			status, tok := f.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback}},
				basic(partner.ClientID, partner.ClientSecret))
			if status != 200 {
				t.Fatalf("exchange: %d %v", status, tok)
			}
			return tok
		}
		refreshStatus := func(partner auth.PartnerCredentials, rt any) int {
			s, _ := f.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt.(string)}}, basic(partner.ClientID, partner.ClientSecret))
			return s
		}

		// DELETE with the bearer token: the token and its grant.
		a := tokens(p, f.creds.MerchantID)
		req, _ := http.NewRequest("DELETE", f.srv.URL+"/oauth/revoke_token", nil)
		req.Header.Set("Authorization", "Bearer "+a["access_token"].(string))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || f.protectedStatus(t, a["access_token"]) != 401 || refreshStatus(p, a["refresh_token"]) != 400 {
			t.Fatalf("revoke_token: %d; the token and its refresh token must stop", resp.StatusCode)
		}
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("revoke_token with a revoked token: %d", resp.StatusCode)
		}
		// A client-credentials token: just that token.
		cc := f.clientCredentialsToken(t)
		req.Header.Set("Authorization", "Bearer "+cc)
		if resp, _ = http.DefaultClient.Do(req); resp.StatusCode != 200 || f.protectedStatus(t, cc) != 401 ||
			f.protectedStatus(t, f.clientCredentialsToken(t)) != 200 {
			t.Fatal("revoking one client-credentials token must stop it and no other")
		}

		// RFC 7009 with a refresh token: the grant's access tokens stop too; invalid tokens are a 200;
		// another client's token is refused.
		b := tokens(p, f.creds.MerchantID)
		revoke := func(h http.Header, tok string) int {
			status, _ := f.postRaw(t, "/oauth/revoke", url.Values{"token": {tok}}, h)
			return status
		}
		if s := revoke(basic(other.ClientID, other.ClientSecret), b["refresh_token"].(string)); s != 400 {
			t.Fatalf("another client revoking: %d", s)
		}
		if s := revoke(pb, b["refresh_token"].(string)); s != 200 || f.protectedStatus(t, b["access_token"]) != 401 ||
			refreshStatus(p, b["refresh_token"]) != 400 {
			t.Fatalf("RFC 7009 revoke of a refresh token: %d", s)
		}
		if s := revoke(pb, "krt_unknown"); s != 200 {
			t.Fatalf("an unknown token: %d, want 200", s)
		}
		if s := revoke(nil, "krt_unknown"); s != 401 {
			t.Fatalf("without client authentication: %d, want 401", s)
		}
		c := tokens(p, f.creds.MerchantID)
		if s := revoke(pb, c["access_token"].(string)); s != 200 || f.protectedStatus(t, c["access_token"]) != 401 {
			t.Fatalf("RFC 7009 revoke of an access token: %d", s)
		}

		// RevokePartner: every token of the partner for that merchant stops, on another node too;
		// another merchant's and another partner's stay.
		second := f.newMerchant(t, "second@example.com", auth.DefaultValidity)
		d, e, g := tokens(p, f.creds.MerchantID), tokens(p, second.MerchantID), tokens(other, f.creds.MerchantID)
		node2 := f.secondNode(t)
		partnerID := partnerOf(t, f, p)
		n, err := auth.RevokePartner(context.Background(), db, f.creds.MerchantID, partnerID, f.clock.Now())
		if err != nil || n != 1 {
			t.Fatalf("RevokePartner: %d %v", n, err)
		}
		for _, svc := range []*auth.Service{f.svc, node2} {
			deadline := time.Now().Add(5 * time.Second)
			for {
				_, err := svc.Verify(d["access_token"].(string))
				if err != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("a node still accepts a revoked partner's token")
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, live := range []map[string]any{e, g} {
				if _, err := svc.Verify(live["access_token"].(string)); err != nil {
					t.Fatalf("an unrelated token stopped: %v", err)
				}
			}
		}
		if refreshStatus(p, d["refresh_token"]) != 400 || refreshStatus(p, e["refresh_token"]) != 200 {
			t.Fatal("RevokePartner: the revoked grant's refresh token must stop, the other merchant's must not")
		}
		if sc, err := auth.PartnerScopes(context.Background(), db.Reader(), partnerID, f.creds.MerchantID); err != nil || sc != 0 {
			t.Fatal("the partner is still authorized after RevokePartner")
		}
		if _, err := auth.RevokePartner(context.Background(), db, "0000000000", partnerID, f.clock.Now()); err != auth.ErrUnknownMerchant {
			t.Fatalf("unknown merchant: %v", err)
		}
	})
}

// The partner id behind partner credentials.
func partnerOf(t *testing.T, f *fixture, p auth.PartnerCredentials) string {
	t.Helper()
	if !strings.HasPrefix(p.AccountID, "acct_") || p.AccountID[5:] != p.PartnerID {
		t.Fatalf("account id %q of partner %q", p.AccountID, p.PartnerID)
	}
	return p.PartnerID
}

func errorAs[T error](err error, target *T) bool { return errors.As(err, target) }

// clientCredentialsToken gets the fixture merchant a token with its own pair.
func (f *fixture) clientCredentialsToken(t *testing.T) string {
	t.Helper()
	_, out := f.post(t, "grant_type=client_credentials", "", nil, basic(f.creds.ClientID, f.creds.ClientSecret))
	return out["access_token"].(string)
}

// postRaw posts a form to path and returns the status and the body.
func (f *fixture) postRaw(t *testing.T, path string, form url.Values, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// secondNode is another token service over the same database, as another node of a cluster.
func (f *fixture) secondNode(t *testing.T) *auth.Service {
	t.Helper()
	svc, err := auth.NewService(context.Background(), auth.Config{DB: f.db, Now: f.clock.Now, RevocationPoll: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Keyring: f.ring})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go svc.Run(ctx)
	return svc
}

// The code lifetime is configurable up to 10 minutes.
func TestCodeTTLIsConfigurable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t))
	svc, err := auth.NewService(context.Background(), auth.Config{DB: f.db, Now: f.clock.Now, CodeTTL: 5 * time.Minute,
		Logger: slog.New(slog.DiscardHandler), Keyring: f.ring})
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc // issue the codes with this service; the fixture's endpoint exchanges them
	p := f.newPartner(t, 0)
	exchange := func(code string) int {
		status, _ := f.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback}},
			basic(p.ClientID, p.ClientSecret))
		return status
	}
	code := f.approve(t, f.creds.MerchantID, authorizeQuery(p))
	f.clock.Advance(4*time.Minute + 59*time.Second)
	if s := exchange(code); s != 200 {
		t.Fatalf("a 5-minute code after 4:59: %d", s)
	}
	code = f.approve(t, f.creds.MerchantID, authorizeQuery(p))
	f.clock.Advance(5 * time.Minute)
	if s := exchange(code); s != 400 {
		t.Fatalf("a 5-minute code after 5:00: %d", s)
	}
}

// Token keys are sealed under the key-encryption key at rest; a key an earlier version stored in
// clear is sealed in place at start, and tokens it sealed keep working.
func TestTokenKeysAreSealedAtRest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		old := f.clientCredentialsToken(t)
		legacy := bytes.Repeat([]byte{7}, 32)
		if _, err := db.Exec(context.Background(), `INSERT INTO token_keys (id, secret, created_at) VALUES (2, $1, 0)`, legacy); err != nil {
			t.Fatal(err)
		}
		svc, err := auth.NewService(context.Background(), auth.Config{DB: db, Keyring: f.ring, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		var stored [][]byte
		rows, err := db.Reader().QueryContext(context.Background(), `SELECT secret FROM token_keys ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var b []byte
			rows.Scan(&b)
			stored = append(stored, b)
		}
		rows.Close()
		if len(stored) != 2 || len(stored[0]) == 32 || len(stored[1]) == 32 || bytes.Contains(stored[1], legacy) {
			t.Fatalf("token keys at rest: %x", stored)
		}
		if _, err := svc.Verify(old); err != nil {
			t.Fatalf("a token of key 1 after the restart: %v", err)
		}
		if _, err := auth.NewService(context.Background(), auth.Config{DB: db, Logger: slog.New(slog.DiscardHandler)}); err == nil {
			t.Fatal("a token service without a keyring started")
		}
	})
}

// A partner's image URL and callback URIs end up, as origins, in the consent page's
// Content-Security-Policy: partner creation refuses any whose host is not a DNS name or an IP
// address, such as one that would end the directive with a ";" or add a source with a space or a
// quote.
func TestCreatePartnerRefusesURLsWithoutAnOrigin(t *testing.T) {
	t.Parallel()
	db := storetest.SQLite(t)
	create := func(image, cb string) error {
		return db.Write(context.Background(), func(tx *store.Tx) error {
			_, err := auth.CreatePartner(context.Background(), tx, auth.NewPartner{Name: "Books Co", ImageURL: image, CallbackURIs: []string{cb}}, time.Now())
			return err
		})
	}
	const goodImage, goodCallback = "https://partner.example/logo.png", "https://partner.example/callback"
	if err := create(goodImage, goodCallback); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"partner.example;script-src", "partner.example;", "partner.example'unsafe-inline'", `partner.example"`,
		"partner.example,evil.example", "*.partner.example", "partner.example%3Bscript-src", "partner.example%20evil.example"} {
		for _, tc := range []struct{ field, image, cb string }{
			{"image_url", "https://" + host + "/logo.png", goodCallback},
			{"callback_uri", goodImage, "https://" + host + "/callback"},
		} {
			var f *fault.Error
			if err := create(tc.image, tc.cb); !errors.As(err, &f) || f.Field != tc.field {
				t.Errorf("%s with host %q: %v, want a 400 naming %s", tc.field, host, err, tc.field)
			}
		}
	}
	// A space ends the URL for net/url's parser already: refused too.
	for _, tc := range []struct{ image, cb string }{{"https://partner.example /logo.png", goodCallback}, {goodImage, "https://partner .example/cb"}} {
		if err := create(tc.image, tc.cb); err == nil {
			t.Errorf("%q / %q accepted", tc.image, tc.cb)
		}
	}
}
