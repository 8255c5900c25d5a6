package auth_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/api/apitest"
	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// fixture is a token service behind a real HTTP server, with a protected route that echoes the
// merchant of the token, and one merchant with a client-credential pair.
type fixture struct {
	db    *store.DB
	svc   *auth.Service
	srv   *httptest.Server
	clock *clock.Manual
	creds auth.Credentials
	ring  *envelope.Keyring
}

// newKeyring returns a keyring under a fresh key-encryption key over db.
func newKeyring(t testing.TB, db *store.DB) *envelope.Keyring {
	t.Helper()
	kek, err := envelope.ParseKEK(envelope.NewKEKText())
	if err != nil {
		t.Fatal(err)
	}
	ring, err := envelope.NewKeyring(context.Background(), db, kek, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

func newFixture(t testing.TB, db *store.DB) *fixture {
	t.Helper()
	f := &fixture{db: db, clock: clock.NewManual(time.Now())}
	f.ring = newKeyring(t, db)
	svc, err := auth.NewService(context.Background(), auth.Config{DB: db, Now: f.clock.Now, RevocationPoll: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Keyring: f.ring})
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go svc.Run(ctx)
	r := httpapi.NewRouter()
	r.Handle("POST", "/oauth/token", svc.TokenHandler())
	r.Handle("POST", "/oauth/revoke", svc.RevokeHandler())
	r.Handle("DELETE", "/oauth/revoke_token", svc.RevokeTokenHandler())
	r.Handle("GET", "/protected", svc.Require(auth.ScopeEcom, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := auth.ClaimsFrom(r.Context())
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"merchant_id": c.MerchantID, "client_id": c.ClientIDString()})
	})))
	// The token service's routes answer as api/openapi.yaml says; /protected is the test's own.
	f.srv = httptest.NewServer(apitest.Handler(t, httpapi.Middleware(slog.New(slog.DiscardHandler), nil, r), nil))
	t.Cleanup(f.srv.Close)
	f.creds = f.newMerchant(t, "shop@example.com", auth.DefaultValidity)
	return f
}

func (f *fixture) newMerchant(t testing.TB, email string, validity time.Duration) auth.Credentials {
	t.Helper()
	var c auth.Credentials
	err := f.db.Write(context.Background(), func(tx *store.Tx) error {
		m, err := merchant.Create(context.Background(), tx, merchant.New{Name: "Shop", Email: email}, time.Now())
		if err != nil {
			return err
		}
		c, err = auth.CreateClient(context.Background(), tx, m.ID, validity, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// post sends a token request and decodes the JSON answer.
func (f *fixture) post(t *testing.T, query string, contentType string, body io.Reader, header http.Header) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+"/oauth/token?"+query, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("token response is not JSON: %v", err)
	}
	return resp, out
}

func basic(id, secret string) http.Header {
	return http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))}}
}

func (f *fixture) get(t *testing.T, token string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+"/protected", nil)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

func TestClientCredentialsWithOAuth2Client(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		for name, style := range map[string]oauth2.AuthStyle{"basic auth": oauth2.AuthStyleInHeader, "params": oauth2.AuthStyleInParams} {
			t.Run(name, func(t *testing.T) {
				cfg := clientcredentials.Config{ClientID: f.creds.ClientID, ClientSecret: f.creds.ClientSecret,
					TokenURL: f.srv.URL + "/oauth/token", AuthStyle: style}
				tok, err := cfg.Token(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if tok.TokenType != "Bearer" || !strings.HasPrefix(tok.AccessToken, "kat_") || tok.RefreshToken != "" {
					t.Fatalf("token %+v", tok)
				}
				if left := time.Until(tok.Expiry); left < 12*time.Hour-time.Minute || left > 12*time.Hour+time.Minute {
					t.Fatalf("expires in %v, want 12h", left)
				}
				if tok.Extra("merchant_id") != f.creds.MerchantID || tok.Extra("scope") != "ecom invoice" {
					t.Fatalf("merchant_id %v, scope %v", tok.Extra("merchant_id"), tok.Extra("scope"))
				}
				resp, err := cfg.Client(context.Background()).Get(f.srv.URL + "/protected")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var who map[string]string
				json.NewDecoder(resp.Body).Decode(&who)
				if resp.StatusCode != 200 || who["merchant_id"] != f.creds.MerchantID || who["client_id"] != f.creds.ClientID {
					t.Fatalf("protected route: %d %v", resp.StatusCode, who)
				}
			})
		}
	})
}

func TestTokenRequestShapes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		id, secret := f.creds.ClientID, f.creds.ClientSecret
		form := "application/x-www-form-urlencoded"
		multi := func(fields map[string]string) (string, io.Reader) {
			var b strings.Builder
			w := multipart.NewWriter(&b)
			for k, v := range fields {
				w.WriteField(k, v)
			}
			w.Close()
			return w.FormDataContentType(), strings.NewReader(b.String())
		}
		mct, mbody := multi(map[string]string{"grant_type": "client_credentials", "client_id": id, "client_secret": secret})
		for _, tc := range []struct {
			name   string
			query  string
			ct     string
			body   io.Reader
			header http.Header
		}{
			{"query string, empty body, basic (the shop plugin)", "grant_type=client_credentials", "", nil, basic(id, secret)},
			{"query string, empty form body, basic", "grant_type=client_credentials", form, strings.NewReader(""), basic(id, secret)},
			{"form body, basic", "", form, strings.NewReader("grant_type=client_credentials"), basic(id, secret)},
			{"form body with client params", "", form, strings.NewReader("grant_type=client_credentials&client_id=" + id + "&client_secret=" + secret), nil},
			{"query string with client params", "grant_type=client_credentials&client_id=" + id + "&client_secret=" + secret, "", nil, nil},
			{"multipart body", "", mct, mbody, nil},
			{"basic and agreeing params", "grant_type=client_credentials&client_id=" + id, "", nil, basic(id, secret)},
			{"same value in query and body", "grant_type=client_credentials", form, strings.NewReader("grant_type=client_credentials"), basic(id, secret)},
			{"scope narrowed", "grant_type=client_credentials&scope=ecom", "", nil, basic(id, secret)},
			{"lower-case basic scheme", "grant_type=client_credentials", "", nil, http.Header{"Authorization": {"basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, out := f.post(t, tc.query, tc.ct, tc.body, tc.header)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %v", resp.StatusCode, out)
				}
				if resp.Header.Get("Cache-Control") != "no-store" {
					t.Fatalf("Cache-Control %q", resp.Header.Get("Cache-Control"))
				}
				wantScope := "ecom invoice"
				if strings.Contains(tc.query, "scope=ecom") {
					wantScope = "ecom"
				}
				if out["token_type"] != "Bearer" || out["expires_in"] != float64(43200) || out["scope"] != wantScope ||
					out["merchant_id"] != f.creds.MerchantID || out["access_token"] == nil {
					t.Fatalf("response %v", out)
				}
				if _, ok := out["refresh_token"]; ok {
					t.Fatal("client credentials grant issued a refresh token (RFC 6749 §4.4.3)")
				}
				if code, _, _ := f.get(t, "Bearer "+out["access_token"].(string)); code != 200 {
					t.Fatalf("issued token rejected: %d", code)
				}
			})
		}
	})
}

func TestTokenRequestErrors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		id, secret := f.creds.ClientID, f.creds.ClientSecret
		revoked := f.newMerchant(t, "revoked@example.com", time.Hour)
		revokeClient(t, db, revoked.ClientID)
		form := "application/x-www-form-urlencoded"
		gt := "grant_type=client_credentials"
		for _, tc := range []struct {
			name   string
			query  string
			ct     string
			body   string
			header http.Header
			status int
			code   string
		}{
			{"wrong secret", gt, "", "", basic(id, "0123456789abcdef0123456789abcdef"), 401, "invalid_client"},
			{"unknown client", gt, "", "", basic("0123456789abcdef0123456789abcdef", secret), 401, "invalid_client"},
			{"revoked client", gt, "", "", basic(revoked.ClientID, revoked.ClientSecret), 401, "invalid_client"},
			{"no client authentication", gt, "", "", nil, 401, "invalid_client"},
			{"client id without secret", gt + "&client_id=" + id, "", "", nil, 401, "invalid_client"},
			{"basic and params disagree on id", gt + "&client_id=" + revoked.ClientID, "", "", basic(id, secret), 401, "invalid_client"},
			{"basic and params disagree on secret", gt + "&client_secret=x", "", "", basic(id, secret), 401, "invalid_client"},
			{"basic not base64", gt, "", "", http.Header{"Authorization": {"Basic !!!"}}, 401, "invalid_client"},
			{"basic without colon", gt, "", "", http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(id))}}, 401, "invalid_client"},
			{"bearer instead of basic", gt, "", "", http.Header{"Authorization": {"Bearer x"}}, 401, "invalid_client"},
			{"missing grant_type", "", "", "", basic(id, secret), 400, "invalid_request"},
			{"empty grant_type", "grant_type=", "", "", basic(id, secret), 400, "invalid_request"},
			{"unknown grant_type", "grant_type=magic", "", "", basic(id, secret), 400, "unsupported_grant_type"},
			{"unknown grant_type before client check", "grant_type=magic", "", "", nil, 400, "unsupported_grant_type"},
			{"unknown scope", gt + "&scope=admin", "", "", basic(id, secret), 400, "invalid_scope"},
			{"conflicting grant_type", gt, form, "grant_type=password", basic(id, secret), 400, "invalid_request"},
			{"JSON body", "", "application/json", `{"grant_type":"client_credentials"}`, basic(id, secret), 400, "invalid_request"},
			{"body without content type", "", "", "grant_type=client_credentials", basic(id, secret), 400, "invalid_request"},
			{"malformed query", "grant_type=%zz", "", "", basic(id, secret), 400, "invalid_request"},
			{"malformed multipart", "", "multipart/form-data; boundary=x", "garbage", basic(id, secret), 400, "invalid_request"},
			{"body over 1 MiB", "", form, gt + "&pad=" + strings.Repeat("a", 1<<20), basic(id, secret), 413, "invalid_request"},
			// Text PostgreSQL cannot hold never reaches a query (a NUL once gave a 500 there).
			{"NUL in a client id", gt + "&client_id=%00&client_secret=" + secret, "", "", nil, 400, "invalid_request"},
			{"invalid UTF-8 in a username", "grant_type=password&username=%ff", form, "password=a+long+passphrase", basic(id, secret), 400, "invalid_request"},
			{"NUL in a parameter's name", gt + "&a%00=1", "", "", basic(id, secret), 400, "invalid_request"},
			{"NUL in the Basic client id", gt, "", "", basic("\x00", secret), 401, "invalid_client"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body)
				}
				resp, out := f.post(t, tc.query, tc.ct, body, tc.header)
				if resp.StatusCode != tc.status || out["error"] != tc.code {
					t.Fatalf("got %d %v; want %d %s", resp.StatusCode, out, tc.status, tc.code)
				}
				if desc, _ := out["error_description"].(string); desc == "" {
					t.Fatal("no error_description")
				}
				if tc.status == 401 && resp.Header.Get("WWW-Authenticate") != `Basic realm="kassa"` {
					t.Fatalf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
				}
				if resp.Header.Get("Cache-Control") != "no-store" {
					t.Fatal("error response without Cache-Control: no-store")
				}
			})
		}
	})
}

func TestClientSecretIsStoredHashed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		var stored []byte
		if err := db.Reader().QueryRowContext(context.Background(), "SELECT secret_hash FROM oauth_clients WHERE client_id = $1",
			f.creds.ClientID).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256([]byte(f.creds.ClientSecret))
		if !bytes.Equal(stored, want[:]) || bytes.Contains(stored, []byte(f.creds.ClientSecret)) {
			t.Fatalf("stored %x; want the SHA-256 of the secret", stored)
		}
	})
}

func TestExpiresInIsThePairsValidity(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t))
	c := f.newMerchant(t, "hourly@example.com", 90*time.Minute)
	resp, out := f.post(t, "grant_type=client_credentials", "", nil, basic(c.ClientID, c.ClientSecret))
	if resp.StatusCode != 200 || out["expires_in"] != float64(5400) {
		t.Fatalf("%d %v", resp.StatusCode, out)
	}
}

func TestBearerMiddleware(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		_, out := f.post(t, "grant_type=client_credentials", "", nil, basic(f.creds.ClientID, f.creds.ClientSecret))
		good := out["access_token"].(string)
		_, out = f.post(t, "grant_type=client_credentials&scope=invoice", "", nil, basic(f.creds.ClientID, f.creds.ClientSecret))
		invoiceOnly := out["access_token"].(string)
		// A token sealed by another installation's key.
		other := newFixture(t, storetest.SQLite(t))
		_, out = other.post(t, "grant_type=client_credentials", "", nil, basic(other.creds.ClientID, other.creds.ClientSecret))
		foreign := out["access_token"].(string)
		tampered := []byte(good)
		tampered[40] ^= 1

		if code, _, who := f.get(t, "Bearer "+good); code != 200 || who["merchant_id"] != f.creds.MerchantID {
			t.Fatalf("good token: %d %v", code, who)
		}
		if code, _, _ := f.get(t, "bearer "+good); code != 200 {
			t.Fatalf("lower-case scheme: %d", code)
		}
		for _, tc := range []struct{ name, header string }{
			{"missing", ""},
			{"not bearer", "Basic " + good},
			{"empty token", "Bearer "},
			{"garbage", "Bearer not-a-token"},
			{"truncated", "Bearer " + good[:len(good)-1]},
			{"tampered", "Bearer " + string(tampered)},
			{"another installation's", "Bearer " + foreign},
		} {
			code, h, body := f.get(t, tc.header)
			if code != 401 || body["error"] != "invalid_token" || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: %d %v %q", tc.name, code, body, h.Get("WWW-Authenticate"))
			}
		}
		code, h, body := f.get(t, "Bearer "+invoiceOnly)
		if code != 403 || body["error"] != "insufficient_scope" || !strings.Contains(h.Get("WWW-Authenticate"), `scope="ecom"`) {
			t.Errorf("token without ecom: %d %v %q", code, body, h.Get("WWW-Authenticate"))
		}

		f.clock.Advance(12*time.Hour + time.Second)
		code, _, body = f.get(t, "Bearer "+good)
		if code != 401 || body["error"] != "invalid_token" || !strings.Contains(body["message"].(string), "expired") {
			t.Errorf("expired token: %d %v", code, body)
		}
	})
}

// A client revoked elsewhere (the CLI, another node) stops working on every node within one poll.
func TestRevocationReachesEveryNode(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db)
		_, out := f.post(t, "grant_type=client_credentials", "", nil, basic(f.creds.ClientID, f.creds.ClientSecret))
		tok := out["access_token"].(string)
		if _, err := f.svc.Verify(tok); err != nil {
			t.Fatal(err)
		}
		revokeClient(t, db, f.creds.ClientID)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := f.svc.Verify(tok); err == auth.ErrRevokedToken {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("revoked client's token still accepted after 10 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		resp, out := f.post(t, "grant_type=client_credentials", "", nil, basic(f.creds.ClientID, f.creds.ClientSecret))
		if resp.StatusCode != 401 || out["error"] != "invalid_client" {
			t.Fatalf("revoked client got a token: %d %v", resp.StatusCode, out)
		}
	})
}

// revokeClient revokes a client as the operator's CLI does: in the database, applied by no node.
func revokeClient(t *testing.T, db *store.DB, clientID string) auth.RevokedClient {
	t.Helper()
	var out auth.RevokedClient
	err := db.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		out, err = auth.RevokeClient(context.Background(), tx, clientID, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRevokeClientOnThisNodeIsImmediate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t))
	_, out := f.post(t, "grant_type=client_credentials", "", nil, basic(f.creds.ClientID, f.creds.ClientSecret))
	if err := f.svc.RevokeClient(context.Background(), f.creds.ClientID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Verify(out["access_token"].(string)); err != auth.ErrRevokedToken {
		t.Fatalf("Verify after local revoke: %v", err)
	}
	if err := f.svc.RevokeClient(context.Background(), "0123456789abcdef0123456789abcdef"); err != auth.ErrUnknownClient {
		t.Fatalf("revoke unknown: %v", err)
	}
}

func TestScopes(t *testing.T) {
	t.Parallel()
	s, err := auth.ParseScopes("  invoice ecom ")
	if err != nil || s != auth.ScopeEcom|auth.ScopeInvoice || s.String() != "ecom invoice" {
		t.Fatalf("ParseScopes = %v %q %v", s, s.String(), err)
	}
	if _, err := auth.ParseScopes("ecom admin"); err == nil {
		t.Fatal("unknown scope accepted")
	}
	if !s.Has(auth.ScopeEcom) || auth.ScopeInvoice.Has(auth.ScopeEcom) {
		t.Fatal("Has")
	}
}
