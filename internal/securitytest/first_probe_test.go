package securitytest_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/cardenc/cardenctest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/velocity"
)

// A partner the merchant approved for invoice only tries to take payments for it: with its v1 API key
// acting for the merchant, and with the bearer token of the approval.
func TestInvoiceOnlyPartnerCannotTakePayments(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	m := k.NewMerchant(t)
	p := k.NewPartner(t)
	key := k.NewAPIKey(t, p.AccountID, checkout.AllPermissions)
	tok := k.PartnerTokens(t, p, m.ID, auth.ScopeInvoice)

	r := k.Do(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1000, "currency": "cad"},
		checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, "acct_"+m.ID)
	if r.Status != http.StatusForbidden || r.Str("error") != "payments_not_approved" {
		t.Errorf("the partner's v1 key takes a payment for the merchant: %d %s", r.Status, r.Raw)
	}
	r = k.Do(t, "POST", "/transaction-service/sale", cardSale(cardtest.Visa), "Authorization", "Bearer "+tok.Str("access_token"))
	if r.Status != http.StatusForbidden || r.Str("error") != "insufficient_scope" {
		t.Errorf("the partner's invoice token makes a sale: %d %s", r.Status, r.Raw)
	}
}

// Thirty wrong passwords at once against the public sign-in pages (the dashboard's and the consent
// flow's), each for another e-mail: every argon2id check holds 64 MiB, so unbounded they took the
// server past 2 GB. The heap grows by less than 300 MiB, and what the bound cannot take is refused 429
// with Retry-After. Not parallel, so that no other test's allocations count.
func TestWrongPasswordsCannotExhaustMemory(t *testing.T) {
	k := start(t, server.Config{})
	request := signintest.Field(t, signintest.Get(t, signintest.Client(), k.authorizeURL(k.NewPartner(t))), "request")
	transport := &http.Transport{MaxIdleConnsPerHost: 30}
	t.Cleanup(transport.CloseIdleConnections)
	hc := &http.Client{Transport: transport}
	var mu sync.Mutex
	answers := map[int]int{}
	growth := servertest.HeapGrowth(func() {
		servertest.Parallel(30, func(i int) {
			path, form := "/dashboard/sign-in", url.Values{"email": {fmt.Sprintf("guess%d@example.com", i)}, "password": {"wrong password"}}
			if i%2 == 1 {
				path = "/oauth/authorize/sign-in"
				form.Set("request", request)
			}
			resp, err := hc.PostForm(k.URL+path, form)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			answers[resp.StatusCode]++
			if wait, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode == http.StatusTooManyRequests && wait < 1 {
				t.Errorf("%s answered 429 with Retry-After %q", path, resp.Header.Get("Retry-After"))
			}
		})
	})
	t.Logf("answers %v; the heap grew by %d MiB at its peak", answers, growth)
	if growth >= 300 {
		t.Errorf("the heap grew by %d MiB, want less than 300", growth)
	}
	if answers[http.StatusUnauthorized] < 1 || answers[http.StatusUnauthorized]+answers[http.StatusTooManyRequests] != 30 {
		t.Errorf("answers %v: want some checked (401), the rest refused (429)", answers)
	}
}

// A stream of guesses at one account, each sent before the last one's password check has ended:
// were the account's count read before the check and written after, every guess in flight would be
// checked. No more than the account's limit of them is checked; the others are refused unchecked.
func TestParallelGuessesAreCountedBeforeChecking(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	k.newShop(t, "guessed.example")
	var mu sync.Mutex
	answers := map[int]int{}
	servertest.Parallel(30, func(i int) {
		time.Sleep(time.Duration(i) * 60 * time.Millisecond) // faster than one password check
		resp, err := http.PostForm(k.URL+"/dashboard/sign-in", url.Values{"email": {"owner@guessed.example"}, "password": {"guess " + strconv.Itoa(i)}})
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		mu.Lock()
		answers[resp.StatusCode]++
		mu.Unlock()
	})
	if answers[http.StatusUnauthorized] < 1 || answers[http.StatusUnauthorized] > auth.AccountAttemptLimit ||
		answers[http.StatusUnauthorized]+answers[http.StatusTooManyRequests] != 30 {
		t.Fatalf("30 overlapping guesses: %v; want at most %d checked (401), the rest 429", answers, auth.AccountAttemptLimit)
	}
}

// Strangers who do not know the password guess it, from addresses of their own, until the account's
// count is full: the merchant still signs in from its usual address, and its integration's password
// grant, made with its own client credentials, still gets a token.
func TestStrangersCannotLockTheMerchantOut(t *testing.T) {
	t.Parallel()
	k := start(t, behindProxy)
	s := k.newShop(t, "office.example")
	const owner, office = "owner@office.example", "203.0.113.7"
	signInFrom := func(from, password string) int {
		t.Helper()
		resp, _ := k.browser(t).post("/dashboard/sign-in", url.Values{"email": {owner}, "password": {password}}, "X-Forwarded-For", from)
		return resp.StatusCode
	}
	if status := signInFrom(office, pw); status != http.StatusSeeOther {
		t.Fatalf("the merchant's sign-in from its office: %d", status)
	}
	creds := k.NewClient(t, s.id)
	for i := range auth.AccountAttemptLimit + 1 {
		want := http.StatusUnauthorized
		if i == auth.AccountAttemptLimit {
			want = http.StatusTooManyRequests
		}
		if status := signInFrom("198.51.100."+strconv.Itoa(i+1), "guess "+strconv.Itoa(i)); status != want {
			t.Fatalf("a stranger's guess %d: %d, want %d", i+1, status, want)
		}
	}
	if status := signInFrom(office, pw); status != http.StatusSeeOther {
		t.Errorf("the merchant from its office after the guesses: %d, want 303", status)
	}
	if r := k.passwordGrant(t, creds, owner, pw); r.Status != http.StatusOK || r.Str("access_token") == "" {
		t.Errorf("the merchant's password grant after the guesses: %d %s", r.Status, r.Raw)
	}
}

// A key holding only api_keys:write sends another key's Idempotency-Key with the same body, to be
// handed the full-permission key that the other key's request created.
func TestAnotherKeysIdempotencyKeyReplaysNothing(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	acct := "acct_" + k.NewMerchant(t).ID
	full, weak := k.NewAPIKey(t, acct, checkout.AllPermissions), k.NewAPIKey(t, acct, checkout.APIKeysWrite)
	all := map[string]any{"permissions": checkout.AllPermissions.Names()}
	created := k.Do(t, "POST", "/v1/api-keys", all, checkout.HeaderAPIKey, full.Key, checkout.HeaderAccount, acct, "Idempotency-Key", "X")
	if created.Status != http.StatusOK || created.Str("key") == "" {
		t.Fatalf("the full key's request: %d %s", created.Status, created.Raw)
	}
	r := k.Do(t, "POST", "/v1/api-keys", all, checkout.HeaderAPIKey, weak.Key, checkout.HeaderAccount, acct, "Idempotency-Key", "X")
	if strings.Contains(string(r.Raw), created.Str("key")) || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the weak key was handed the full key's answer: %d %s", r.Status, r.Raw)
	}
	if r.Status != http.StatusForbidden || r.Str("error") != "insufficient_permissions" {
		t.Fatalf("the weak key's request for every permission: %d %s, want 403 insufficient_permissions", r.Status, r.Raw)
	}
}

// Idempotent calls that carry a card, or whose answers carry an API key or a hosted page's URL; then
// the database's files are copied and searched for them, and for a plain SHA-256 of a request, from
// which a card's missing digits and CVV are found by trying them all.
func TestIdempotencyRecordsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	m := k.NewMerchant(t)
	v1 := v1Key(t, k, m.ID)
	cvv := cardtest.AbsentCVV(t, storetest.RawData(t, k.DB))
	secrets := map[string]string{"the card number": cardtest.Amex, "the CVV": cvv}
	recorded := func(r servertest.Response, body map[string]any, path string) servertest.Response {
		t.Helper()
		if r.Status != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, r.Status, r.Raw)
		}
		js, _ := json.Marshal(body) // as servertest sends it
		for i, plain := range [][]byte{js, append([]byte("POST "+path+"?\n"), js...)} {
			sum := sha256.Sum256(plain)
			secrets[fmt.Sprintf("a plain SHA-256 (%d) of POST %s", i, path)] = string(sum[:])
		}
		return r
	}
	sale := cardSale(cardtest.Amex)
	sale["cvv2"] = cvv
	recorded(m.Do(t, "POST", "/transaction-service/sale", sale, "Idempotency-Key", "sale-1"), sale, "/transaction-service/sale")
	newKey := map[string]any{"permissions": []string{"payment_intents:read"}}
	secrets["an API key in an answer"] = recorded(k.Do(t, "POST", "/v1/api-keys", newKey, append(v1, "Idempotency-Key", "key-1")...), newKey, "/v1/api-keys").Str("key")
	page := map[string]any{"amount": 700, "currency": "cad"}
	u := recorded(k.Do(t, "POST", "/v1/checkout/hosted-payment-page/sessions", page, append(v1, "Idempotency-Key", "page-1")...), page,
		"/v1/checkout/hosted-payment-page/sessions").Str("url")
	secrets["a hosted page's URL secret"] = u[strings.LastIndexByte(u, '/')+1:]

	raw := storetest.RawData(t, k.DB)
	if !strings.Contains(raw, "page-1") {
		t.Fatal("the database's files hold no Idempotency-Key: the search reads nothing")
	}
	storetest.NotStored(t, raw, secrets)
}

// Card testing with one credential: one bearer token runs declined sales with a new card each time;
// one v1 payment intent is confirmed again and again with declining cards; one API key makes hosted
// pages without end. The merchant's limits are set low, so that each is past its edge at once.
func TestCardTestingIsThrottled(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	m := k.NewMerchant(t)
	m.Update(t, merchant.Update{Velocity: velocity.Limits{CredentialDeclines: 3, IntentFailures: 2, Sessions: 2}})
	throttled := func(what string, r servertest.Response) {
		t.Helper()
		if r.Status != http.StatusTooManyRequests || r.Str("error") != "rate_limited" || r.Header.Get("Retry-After") == "" || r.Header.Get("RateLimit-Policy") == "" {
			t.Errorf("%s: %d %s, want 429 rate_limited with Retry-After and RateLimit-Policy", what, r.Status, r.Raw)
		}
	}

	for _, number := range []string{cardtest.Declined, cardtest.InsufficientFunds, cardtest.LostCard} {
		if r := m.Do(t, "POST", "/transaction-service/sale", cardSale(number)); r.Str("transaction_result") != "DECLINED" {
			t.Fatalf("a declined sale: %d %s", r.Status, r.Raw)
		}
	}
	throttled("the token's sale after three declines", m.Do(t, "POST", "/transaction-service/sale", cardSale(cardtest.StolenCard)))

	v1 := v1Key(t, k, m.ID)
	confirm := func(intent, number string) servertest.Response {
		t.Helper()
		pm := k.Do(t, "POST", "/v1/payment-methods", map[string]any{"type": "card",
			"card": map[string]any{"number": number, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}, v1...).Str("id")
		return k.Do(t, "POST", "/v1/payment-intents/"+intent+"/confirm", map[string]any{"payment_method": pm}, v1...)
	}
	intent := k.Do(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1000, "currency": "cad"}, v1...).Str("id")
	for _, number := range []string{cardtest.ExpiredCard, cardtest.IncorrectCVC} {
		if r := confirm(intent, number); r.Str("status") != "requires_payment_method" {
			t.Fatalf("a declined confirmation: %d %s", r.Status, r.Raw)
		}
	}
	throttled("the intent's confirmation after two failures", confirm(intent, cardtest.Visa))

	session := map[string]any{"amount": 1000, "currency": "cad"}
	for range 2 {
		if r := k.Do(t, "POST", "/v1/checkout/hosted-payment-page/sessions", session, v1...); r.Status != http.StatusOK {
			t.Fatalf("a hosted page: %d %s", r.Status, r.Raw)
		}
	}
	throttled("the key's third hosted page in a minute", k.Do(t, "POST", "/v1/checkout/hosted-payment-page/sessions", session, v1...))
}

// The operator revokes a partner's OAuth client (what `kassa client revoke` does); the partner's v1
// API key, which acted for the merchant that approved it, is tried again once the revocation poll
// has passed.
func TestRevokedPartnersKeyStopsWorking(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	m := k.NewMerchant(t)
	p := k.NewPartner(t)
	key := k.NewAPIKey(t, p.AccountID, checkout.AllPermissions)
	k.PartnerTokens(t, p, m.ID, auth.ScopeEcom)
	as := []string{checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, "acct_" + m.ID}
	if r := k.Do(t, "GET", "/v1/payment-intents", nil, as...); r.Status != http.StatusOK {
		t.Fatalf("the partner's key before the revocation: %d %s", r.Status, r.Raw)
	}
	if _, err := checkout.RevokeClient(context.Background(), k.DB, p.ClientID, k.clk.Now()); err != nil {
		t.Fatal(err)
	}
	k.clk.Advance(auth.DefaultRevocationPoll)
	if r := k.Do(t, "GET", "/v1/payment-intents", nil, as...); r.Status != http.StatusUnauthorized || r.Str("error") != "invalid_api_key" {
		t.Fatalf("the revoked partner's key a poll later: %d %s, want 401 invalid_api_key", r.Status, r.Raw)
	}
}

// One CardEncryption token, charged again after its first sale.
func TestCardTokenCannotBeChargedTwice(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	m := k.NewMerchant(t)
	pub, err := k.CardEncryption().Current(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	tok := cardenctest.Encrypt(t, cardenctest.Input{Key: pub.Encoded(), Cards: [][4]string{{cardtest.Visa, "08", "30", "123"}},
		Now: k.clk.Now().UnixMilli()})[0]
	sale := map[string]any{"amount": "5.00", "token": tok}
	if r := m.Do(t, "POST", "/transaction-service/sale", sale); r.Str("transaction_result") != "APPROVED" {
		t.Fatalf("the token's first sale: %d %s", r.Status, r.Raw)
	}
	for _, op := range []string{"sale", "authorize"} {
		if r := m.Do(t, "POST", "/transaction-service/"+op, sale); r.Status != http.StatusBadRequest || r.Str("error") != "invalid_card_token" {
			t.Errorf("the token again, by a %s: %d %s, want 400 invalid_card_token", op, r.Status, r.Raw)
		}
	}
}

// The password grant with the password and the client secret in the URL, where proxies and access
// logs keep them.
func TestPasswordGrantRefusesCredentialsInTheURL(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	s := k.newShop(t, "url.example")
	creds := k.NewClient(t, s.id)
	q := url.Values{"grant_type": {"password"}, "username": {"owner@url.example"}, "password": {pw},
		"client_id": {creds.ClientID}, "client_secret": {creds.ClientSecret}}
	r := k.Do(t, "POST", "/oauth/token?"+q.Encode(), "", "Content-Type", "application/x-www-form-urlencoded")
	if r.Status != http.StatusBadRequest || r.Str("error") != "invalid_request" || r.Str("access_token") != "" {
		t.Fatalf("the password grant from the URL: %d %s, want 400 invalid_request", r.Status, r.Raw)
	}
}

// JSON answers, successes and errors of both APIs and the token endpoint, read for what a shared cache
// or the browser may keep of them.
func TestJSONAnswersAreNeverCached(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	m := k.NewMerchant(t)
	v1 := v1Key(t, k, m.ID)
	token := url.Values{"grant_type": {"client_credentials"}, "client_id": {m.Creds.ClientID}, "client_secret": {m.Creds.ClientSecret}}
	for what, r := range map[string]servertest.Response{
		"a customer list":    m.Do(t, "GET", "/customer-service/customer", nil),
		"a 401":              k.Do(t, "GET", "/customer-service/customer", nil),
		"a v1 list":          k.Do(t, "GET", "/v1/payment-intents", nil, v1...),
		"a v1 404":           k.Do(t, "GET", "/v1/payment-intents/pi_nothere", nil, v1...),
		"a token":            k.Do(t, "POST", "/oauth/token", token.Encode(), "Content-Type", "application/x-www-form-urlencoded"),
		"a new API key":      k.Do(t, "POST", "/v1/api-keys", map[string]any{"permissions": []string{"payment_intents:read"}}, v1...),
		"the router's 404":   k.Do(t, "GET", "/no-such-route", nil),
		"a refused customer": m.Do(t, "POST", "/customer-service/customer", map[string]any{"email": "not an address"}),
	} {
		if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("%s (%d): Cache-Control %q, want no-store", what, r.Status, cc)
		}
	}
}

// Text the database cannot keep as sent — a NUL, bytes that are not UTF-8 — in a gateway API field.
func TestUnstorableTextIsRefused(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	m := k.NewMerchant(t)
	for what, name := range map[string]string{"a NUL": `Ann\u0000e`, "invalid UTF-8": "Ann\xffe"} {
		r := m.Do(t, "POST", "/customer-service/customer", `{"email":"ann@example.com","first_name":"`+name+`"}`)
		if r.Status != http.StatusBadRequest || r.Str("field") != "first_name" {
			t.Errorf("a first name with %s: %d %s, want 400 naming first_name", what, r.Status, r.Raw)
		}
	}
	if r := m.Do(t, "GET", "/customer-service/customer", nil); r.Status != http.StatusOK || strings.Contains(string(r.Raw), "ann@example.com") {
		t.Fatalf("the customers after the refusals: %d %s", r.Status, r.Raw)
	}
}

// A partner recorded with a ";" and quotes in its image URL, before partners' URLs were checked: its
// origin goes into the consent page's Content-Security-Policy, where it would add directives.
func TestPartnerURLCannotAddCSPDirectives(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	k.newShop(t, "csp.example")
	p := k.NewPartner(t)
	if _, err := k.DB.Raw().ExecContext(context.Background(), `UPDATE partners SET image_url = $1 WHERE id = $2`,
		`https://plugin.example;script-src 'unsafe-inline'/logo.png`, p.PartnerID); err != nil {
		t.Fatal(err)
	}
	c := signintest.Client()
	request := signintest.Field(t, signintest.Get(t, c, k.authorizeURL(p)), "request")
	resp, err := c.PostForm(k.URL+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {"owner@csp.example"}, "password": {pw}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp, err = c.Get(k.authorizeURL(p)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action") || strings.Contains(csp, "script-src") ||
		strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("the consent page's CSP: %q", csp)
	}
}

// "payments-account: acct_" alone, an account id with nothing after its prefix.
func TestBareAccountPrefixIsRefused(t *testing.T) {
	t.Parallel()
	k := start(t, server.Config{})
	key := k.NewAPIKey(t, "acct_"+k.NewMerchant(t).ID, checkout.AllPermissions)
	r := k.Do(t, "GET", "/v1/payment-intents", nil, checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, "acct_")
	if r.Status != http.StatusBadRequest || r.Str("field") != checkout.HeaderAccount {
		t.Fatalf("payments-account: acct_: %d %s, want 400 naming %s", r.Status, r.Raw, checkout.HeaderAccount)
	}
}
