package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/signin/signintest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// Settings → eCommerce: a pair made in the dashboard, its secret read from the page, gets a token
// with golang.org/x/oauth2's client credentials, which the API accepts; the page then shows the
// pair's last use; revoked in the dashboard, its token is refused. A connected partner is listed with
// its scopes, and its access ends from the page: its token is refused within the revocation poll.
func TestSettingsEcommerce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		ctx := context.Background()
		b := s.browser(t)
		csrf := b.signIn("admin@maple.example")
		resp, body := b.get("/dashboard/settings/ecommerce")
		wantStatus(t, "the settings page", resp, body, http.StatusOK)
		if !strings.Contains(body, "No pair yet.") || !strings.Contains(body, `<option value="12h0m0s" selected>`) ||
			!strings.Contains(body, "in test mode") {
			t.Fatalf("the settings page of a new merchant: %s", body)
		}
		// Beside the credentials, the page leads to the API reference, which Kassa serves to anyone.
		if !strings.Contains(body, `<a href="/docs/api">API reference</a>`) || !strings.Contains(body, `<a href="/docs/api#authentication">`) {
			t.Errorf("the settings page does not link to the API reference: %s", body)
		}
		if ref, err := http.Get(s.srv.URL + "/docs/api"); err != nil || ref.StatusCode != http.StatusOK {
			t.Errorf("the API reference the settings page links to: %v %v", ref, err)
		} else {
			ref.Body.Close()
		}
		resp, body = b.post("/dashboard/settings/ecommerce/clients", url.Values{"csrf_token": {csrf}, "validity": {"13h"}})
		wantStatus(t, "a validity not offered", resp, body, http.StatusBadRequest)
		resp, body = b.post("/dashboard/settings/ecommerce/clients", url.Values{"csrf_token": {csrf}, "validity": {"20m0s"}})
		wantStatus(t, "make a pair", resp, body, http.StatusOK)
		id := regexp.MustCompile(`id="new-client-id">([0-9a-f]{32})<`).FindStringSubmatch(body)
		secret := regexp.MustCompile(`id="new-secret">([^<]+)<`).FindStringSubmatch(body)
		if id == nil || secret == nil {
			t.Fatalf("the new pair's page: %s", body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'nonce-") {
			t.Errorf("the page's script is not allowed by its CSP: %s", csp)
		}

		cc := clientcredentials.Config{ClientID: id[1], ClientSecret: secret[1], TokenURL: s.srv.URL + "/oauth/token"}
		tok, err := cc.Token(ctx)
		if err != nil {
			t.Fatalf("a token with the dashboard's pair: %v", err)
		}
		if left := time.Until(tok.Expiry); left < 19*time.Minute || left > 21*time.Minute {
			t.Errorf("the token lasts %v, want the pair's 20 minutes", left)
		}
		list := func() int {
			req, _ := http.NewRequest("GET", s.srv.URL+"/transaction-service/transaction", nil)
			req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if st := list(); st != http.StatusOK {
			t.Fatalf("the API with the token: %d", st)
		}
		_, body = b.get("/dashboard/settings/ecommerce")
		if strings.Contains(body, "<td>never</td>") || !strings.Contains(body, "<td>20 minutes</td>") || strings.Contains(body, secret[1]) {
			t.Errorf("the pair's row after a token (and never its secret again): %s", body)
		}
		resp, body = b.post("/dashboard/settings/ecommerce/clients/"+id[1]+"/revoke", url.Values{"csrf_token": {signintest.Field(t, body, "csrf_token")}})
		wantStatus(t, "revoke the pair", resp, body, http.StatusOK)
		if st := list(); st != http.StatusUnauthorized {
			t.Fatalf("the API with the revoked pair's token: %d", st)
		}
		if _, err := cc.Token(ctx); err == nil {
			t.Fatal("the revoked pair got a token")
		}
		resp, body = b.post("/dashboard/settings/ecommerce/clients/"+id[1]+"/revoke", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "revoke it again", resp, body, http.StatusNotFound)

		// Another merchant's pair is not this merchant's to revoke.
		var theirs auth.Credentials
		if err := db.Write(ctx, func(tx *store.Tx) error {
			m, _, err := user.CreateMerchant(ctx, tx, merchant.New{Name: "Other", Email: "other@example.com"}, "", time.Now())
			if err != nil {
				return err
			}
			theirs, err = auth.CreateClient(ctx, tx, m.ID, auth.DefaultValidity, time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		resp, body = b.post("/dashboard/settings/ecommerce/clients/"+theirs.ClientID+"/revoke", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "another merchant's pair", resp, body, http.StatusNotFound)

		// A partner the merchant approved: listed, and its access ended from the page.
		var p auth.PartnerCredentials
		if err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			p, err = auth.CreatePartner(ctx, tx, auth.NewPartner{Name: "Ledgerly", ImageURL: "https://ledgerly.example/logo.png",
				CallbackURIs: []string{"https://ledgerly.example/cb"}}, time.Now())
			if err != nil {
				return err
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// The merchant approves it on the consent page (in-process here), and the partner exchanges the
		// code for a token that reads the merchant's transactions.
		req, err := s.srv.Auth().ParseAuthorizationRequest(ctx, url.Values{"response_type": {"code"}, "client_id": {p.ClientID},
			"redirect_uri": {"https://ledgerly.example/cb"}, "scope": {"ecom"}, "state": {"s"}})
		if err != nil {
			t.Fatal(err)
		}
		code, err := s.srv.Auth().Authorize(ctx, s.merchantID, req)
		if err != nil {
			t.Fatal(err)
		}
		ptok, err := (&oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, RedirectURL: "https://ledgerly.example/cb",
			Endpoint: oauth2.Endpoint{TokenURL: s.srv.URL + "/oauth/token", AuthStyle: oauth2.AuthStyleInHeader}}).Exchange(ctx, code)
		if err != nil {
			t.Fatalf("the partner's code exchange: %v", err)
		}
		tok = ptok
		if st := list(); st != http.StatusOK {
			t.Fatalf("the partner's token: %d", st)
		}
		_, body = b.get("/dashboard/settings/ecommerce")
		if !strings.Contains(body, "<td>Ledgerly</td><td>ecom</td>") {
			t.Fatalf("the connected partner: %s", body)
		}
		resp, body = b.post("/dashboard/settings/ecommerce/partners/"+p.PartnerID+"/revoke", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "end the partner's access", resp, body, http.StatusOK)
		if !strings.Contains(body, "No partner has access to your account.") {
			t.Errorf("after ending the partner's access: %s", body)
		}
		// Its token stops on every node within the revocation poll.
		for start := time.Now(); list() != http.StatusUnauthorized; time.Sleep(100 * time.Millisecond) {
			if time.Since(start) > 2*auth.DefaultRevocationPoll {
				t.Fatalf("the partner's token still works after %v", time.Since(start))
			}
		}
		var scopes auth.Scopes
		if err := db.Read(ctx, func(q store.Querier) error {
			var err error
			scopes, err = auth.PartnerScopes(ctx, q, p.PartnerID, s.merchantID)
			return err
		}); err != nil || scopes != 0 {
			t.Errorf("the partner's scopes after: %v %v", scopes, err)
		}
		resp, body = b.post("/dashboard/settings/ecommerce/partners/"+p.PartnerID+"/revoke", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "end it again", resp, body, http.StatusNotFound)
	})
}

// Settings → eCommerce, the rest: the card-encryption key with the script tag and its SRI hash, and
// its rotation; a payments-API key made with the permissions ticked, its secret shown once, that the
// v1 API accepts, then revoked; the hosted page's embedding origins, refused when one is not an origin.
func TestSettingsKeysAndOrigins(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{PublicURL: "https://pay.maple.example"})
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		_, body := b.get("/dashboard/settings/ecommerce")
		script := regexp.MustCompile(`id="card-script">([^<]+)<`).FindStringSubmatch(body)
		key := regexp.MustCompile(`id="card-key">([0-9a-f]+)<`).FindStringSubmatch(body)
		if script == nil || key == nil || !strings.Contains(html.UnescapeString(script[1]), `<script src="https://pay.maple.example/js/`) ||
			!strings.Contains(html.UnescapeString(script[1]), `integrity="sha384-`) {
			t.Fatalf("the card-encryption part: %s", body)
		}
		resp, body := b.post("/dashboard/settings/ecommerce/card-key/rotate", url.Values{"csrf_token": {csrf}, "grace": {"168h0m0s"}})
		wantStatus(t, "rotate the card key", resp, body, http.StatusOK)
		if k := regexp.MustCompile(`id="card-key">([0-9a-f]+)<`).FindStringSubmatch(body); k == nil || k[1] == key[1] {
			t.Errorf("the key after rotating: %v", k)
		}
		resp, body = b.post("/dashboard/settings/ecommerce/card-key/rotate", url.Values{"csrf_token": {csrf}, "grace": {"5h"}})
		wantStatus(t, "a grace not offered", resp, body, http.StatusBadRequest)

		// The form offers every permission, the refunds' included.
		for _, p := range []string{"payment_intents:write", "refunds:read", "refunds:write"} {
			if !strings.Contains(body, `name="permission" type="checkbox" value="`+p+`"`) {
				t.Errorf("the API-key form offers no %s", p)
			}
		}
		resp, body = b.post("/dashboard/settings/ecommerce/api-keys", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "a key without permissions", resp, body, http.StatusBadRequest)
		resp, body = b.post("/dashboard/settings/ecommerce/api-keys", url.Values{"csrf_token": {csrf},
			"permission": {"payment_intents:read", "payment_intents:write", "refunds:read"}})
		wantStatus(t, "make a key", resp, body, http.StatusOK)
		secret := regexp.MustCompile(`id="new-api-key">(kk_[^<]+)<`).FindStringSubmatch(body)
		id := regexp.MustCompile(`/api-keys/(key_[^/]+)/revoke`).FindStringSubmatch(body)
		if secret == nil || id == nil || !strings.Contains(body, "payment_intents:read payment_intents:write refunds:read") {
			t.Fatalf("the new key's page: %s", body)
		}
		get := func(path string) int {
			req, _ := http.NewRequest("GET", s.srv.URL+path, nil)
			req.Header.Set("payments-api-key", secret[1])
			req.Header.Set("payments-account", "acct_"+s.merchantID)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		v1 := func() int { return get("/v1/payment-intents") }
		if st := v1(); st != http.StatusOK {
			t.Fatalf("the v1 API with the dashboard's key: %d", st)
		}
		if st := get("/v1/refunds"); st != http.StatusOK {
			t.Fatalf("the refunds with the dashboard's key holding refunds:read: %d", st)
		}
		_, body = b.get("/dashboard/settings/ecommerce")
		if strings.Contains(body, secret[1]) {
			t.Error("the key's secret is shown again")
		}
		resp, body = b.post("/dashboard/settings/ecommerce/api-keys/"+id[1]+"/revoke", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "revoke the key", resp, body, http.StatusOK)
		// Every node stops accepting it within the key cache's lifetime, at most the revocation poll.
		for start := time.Now(); v1() != http.StatusUnauthorized; time.Sleep(100 * time.Millisecond) {
			if time.Since(start) > 2*auth.DefaultRevocationPoll {
				t.Fatalf("the revoked key still works after %v", time.Since(start))
			}
		}
		resp, body = b.post("/dashboard/settings/ecommerce/api-keys/"+id[1]+"/revoke", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "revoke it again", resp, body, http.StatusNotFound)

		resp, body = b.post("/dashboard/settings/ecommerce/origins", url.Values{"csrf_token": {csrf}, "origins": {"https://shop.maple.example/path"}})
		wantStatus(t, "an origin with a path", resp, body, http.StatusBadRequest)
		resp, body = b.post("/dashboard/settings/ecommerce/origins", url.Values{"csrf_token": {csrf},
			"origins": {"https://shop.maple.example\r\nhttps://www.maple.example"}})
		wantStatus(t, "save origins", resp, body, http.StatusOK)
		if !strings.Contains(body, "https://shop.maple.example\nhttps://www.maple.example</textarea>") {
			t.Errorf("the saved origins: %s", body)
		}
	})
}
