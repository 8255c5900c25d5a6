package securitytest_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/card"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/password"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/totp"
	"github.com/kassapay/kassa/internal/user"
	"github.com/kassapay/kassa/internal/vault"
)

// pw is the password of every user the fixture makes.
const pw = "correct horse battery"

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// hashed is pw's argon2id hash, computed once: every user the fixture makes has it.
var hashed struct {
	once sync.Once
	hash string
	err  error
}

func passwordHash(t testing.TB) string {
	t.Helper()
	hashed.once.Do(func() {
		hashed.hash, hashed.err = user.HashPassword(context.Background(), password.NewGate(password.GateConfig{}), pw)
	})
	if hashed.err != nil {
		t.Fatal(hashed.err)
	}
	return hashed.hash
}

// kassa is a Kassa running in-process over its own SQLite database, on a manual clock that stands
// still unless a test moves it (TOTP codes are computed from it), with the key-encryption key it
// seals secrets under.
type kassa struct {
	*servertest.Server
	kek *envelope.KEK
	clk *clock.Manual
}

// start runs a Kassa configured by cfg; its clock and key-encryption key are the fixture's.
func start(t testing.TB, cfg server.Config) *kassa {
	t.Helper()
	return startOn(t, storetest.SQLite(t), cfg)
}

// startOn is start over db.
func startOn(t testing.TB, db *store.DB, cfg server.Config) *kassa {
	t.Helper()
	k := &kassa{kek: servertest.NewKEK(t), clk: clock.NewManual(time.Now())}
	cfg.KEK, cfg.Now = k.kek, k.clk.Now
	k.Server = servertest.Start(t, db, cfg)
	return k
}

// behindProxy is a Kassa behind a reverse proxy on the loopback network, where every test request
// comes from: X-Forwarded-For names the client, so that an attack can come from many addresses.
var behindProxy = server.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// shop is a merchant with a user of each role, all with the password pw: role@domain.
type shop struct {
	k     *kassa
	id    string
	users map[user.Role]user.User
}

// newShop makes a merchant whose users are owner@domain, admin@domain, reporting@domain and
// sales@domain.
func (k *kassa) newShop(t testing.TB, domain string) *shop {
	t.Helper()
	ctx := context.Background()
	s := &shop{k: k, users: map[user.Role]user.User{}}
	hash := passwordHash(t)
	err := k.DB.Write(ctx, func(tx *store.Tx) error {
		m, owner, err := user.CreateMerchant(ctx, tx, merchant.New{Name: "Shop at " + domain, Email: "owner@" + domain}, hash, k.clk.Now())
		if err != nil {
			return err
		}
		s.id, s.users[user.Owner] = m.ID, owner
		for _, r := range []user.Role{user.Admin, user.Reporting, user.Sales} {
			if s.users[r], err = user.Create(ctx, tx, user.New{MerchantID: m.ID, Email: string(r) + "@" + domain, Role: r, Hash: hash}, k.clk.Now()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// v1Key is a new v1 API key of the merchant's own account holding every permission, as the headers
// that send it: the key's, then the account's.
func v1Key(t testing.TB, k *kassa, merchantID string) []string {
	t.Helper()
	key := k.NewAPIKey(t, "acct_"+merchantID, checkout.AllPermissions)
	return []string{checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, "acct_" + merchantID}
}

// cardSale is the body of a gateway API sale of 5.00 with the card number.
func cardSale(number string) map[string]any {
	return map[string]any{"amount": "5.00", "card_number": number, "card_expiry_month": "12", "card_expiry_year": "40", "cvv2": "123"}
}

// customerWithCard saves a Mastercard to a new customer of the shop with the e-mail address, as its
// default card.
func (s *shop) customerWithCard(t testing.TB, email string) vault.Customer {
	t.Helper()
	n, err := card.ParseNumber(cardtest.Mastercard)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := s.k.Vault().SaveCard(context.Background(), s.id, vault.SaveTo{New: &vault.Details{Email: email}}, n,
		card.Expiry{Month: 12, Year: s.k.clk.Now().Year() + 2})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// terminalSale is the dashboard terminal's form for a sale of 10.00 whose card is saved to the
// existing customer named (by e-mail or id).
func terminalSale(csrf, customer string) url.Values {
	return url.Values{"csrf_token": {csrf}, "kind": {"SALE"}, "currency": {"CAD"}, "amount": {"10.00"}, "save": {"existing"}, "customer": {customer}}
}

// sentInvoice creates and e-mails an invoice of the merchant through the API, and returns its pay link.
func sentInvoice(t testing.TB, m *servertest.Merchant) string {
	t.Helper()
	r := m.Do(t, "POST", "/invoice-service/invoice", map[string]any{"invoice_number": "INV-1", "currency": "CAD", "send_email": true,
		"customer_email": "payer@example.com", "items": []map[string]any{{"description": "Consulting day", "unit_price": "100.00"}}})
	if r.Status != http.StatusOK || r.Str("payment_url") == "" {
		t.Fatalf("the invoice: %d %s", r.Status, r.Raw)
	}
	return r.Str("payment_url")
}

// webhookTo makes an endpoint for every event at target with the v1 key's headers, and returns its id.
func webhookTo(t testing.TB, k *kassa, v1 []string, target string) string {
	t.Helper()
	r := k.Do(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": target, "enabled_events": []string{"*"}}, v1...)
	if r.Status != http.StatusOK || r.Str("id") == "" {
		t.Fatalf("the endpoint %s: %d %s", target, r.Status, r.Raw)
	}
	return r.Str("id")
}

// firstAttempt waits for the server's deliverer to make a first attempt of a delivery to the endpoint,
// and returns the endpoint's delivery log as the API shows it to the merchant.
func firstAttempt(t testing.TB, k *kassa, v1 []string, endpoint string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := k.Do(t, "GET", "/v1/webhook-endpoints/"+endpoint+"/deliveries", nil, v1...)
		if data, _ := r.Body["data"].([]any); len(data) > 0 {
			if attempts, _ := data[0].(map[string]any)["attempts"].([]any); len(attempts) > 0 {
				return string(r.Raw)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attempt of a delivery to %s in 30 s: %s", endpoint, r.Raw)
		}
	}
}

// enrol turns on a second factor for p as its authenticator app would, and returns the app's secret
// and the recovery codes. The clock then moves a step on, so that the app's next code is unused.
func (k *kassa) enrol(t testing.TB, p user.Person) (totp.Secret, []string) {
	t.Helper()
	ring, err := envelope.NewKeyring(context.Background(), k.DB, k.kek, nil)
	if err != nil {
		t.Fatal(err)
	}
	factors := user.NewTwoFactor(k.DB, ring)
	e, err := factors.Begin(p, k.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	secret, err := totp.ParseSecret(e.Key)
	if err != nil {
		t.Fatal(err)
	}
	codes, err := factors.Confirm(context.Background(), p, e.Token, k.code(secret), k.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	k.clk.Advance(totp.Period)
	return secret, codes
}

// code is the current code of an authenticator app with secret.
func (k *kassa) code(secret totp.Secret) string { return totp.Code(secret, totp.Step(k.clk.Now())) }

// passwordGrant asks the token endpoint for a token with the password grant, the credentials in the
// body and the client authenticated by creds.
func (k *kassa) passwordGrant(t testing.TB, creds auth.Credentials, email, password string) servertest.Response {
	t.Helper()
	form := url.Values{"grant_type": {"password"}, "username": {email}, "password": {password}}
	return k.Do(t, "POST", "/oauth/token", form.Encode(), "Content-Type", "application/x-www-form-urlencoded",
		"Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(creds.ClientID+":"+creds.ClientSecret)))
}

// authorizeURL is the URL a partner sends a merchant to for its approval (servertest.NewPartner's
// callback).
func (k *kassa) authorizeURL(p auth.PartnerCredentials) string {
	return k.URL + "/oauth/authorize?" + url.Values{"response_type": {"code"}, "client_id": {p.ClientID},
		"redirect_uri": {"https://plugin.example/callback"}, "state": {"st-1"}}.Encode()
}

// browser is a client with cookies that follows no redirect, as a browser without script.
type browser struct {
	t    testing.TB
	c    *http.Client
	base string
}

func (k *kassa) browser(t testing.TB) *browser {
	return &browser{t: t, c: signintest.Client(), base: k.URL}
}

func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// get fetches path, or a full URL.
func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	if !strings.HasPrefix(path, "http") {
		path = b.base + path
	}
	req, _ := http.NewRequest("GET", path, nil)
	return b.do(req)
}

// post sends a form, as a page of Kassa's own origin would; hdr adds headers in pairs.
func (b *browser) post(path string, form url.Values, hdr ...string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return b.do(req)
}

// signIn signs in to the dashboard as email (without a second factor) and returns the session's CSRF
// token.
func (b *browser) signIn(email string) string {
	b.t.Helper()
	resp, body := b.post("/dashboard/sign-in", url.Values{"email": {email}, "password": {pw}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
		b.t.Fatalf("sign in as %s: %d %s", email, resp.StatusCode, body)
	}
	resp, body = b.get("/dashboard")
	if resp.StatusCode != http.StatusOK {
		b.t.Fatalf("the home page after signing in: %d", resp.StatusCode)
	}
	return signintest.Field(b.t, body, "csrf_token")
}

// signedIn reports whether the browser holds a dashboard session: the home page opens.
func (b *browser) signedIn() bool {
	b.t.Helper()
	resp, _ := b.get("/dashboard")
	return resp.StatusCode == http.StatusOK
}

// wantStatus fails t unless resp has status.
func wantStatus(t testing.TB, what string, resp *http.Response, body string, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s: %d, want %d\n%s", what, resp.StatusCode, status, body)
	}
}

// totpKey is the key an enrolment page shows to type into an authenticator app ("" when none).
func totpKey(page string) string {
	if m := regexp.MustCompile(`id="totp-key"[^>]*>([A-Z2-7]+)<`).FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return ""
}
