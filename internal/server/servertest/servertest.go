// Package servertest runs a whole Kassa server in-process for tests: a real HTTP server over a real
// database, merchants with client credentials, bearer tokens from the real token endpoint, and log
// capture. Every log line and every response body is checked for test card numbers: one that appears
// in full fails the test. Every response is checked against api/openapi.yaml.
package servertest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/api/apitest"
	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
)

// Server is a running in-process Kassa.
type Server struct {
	*server.Server
	URL  string
	DB   *store.DB
	Logs *cardtest.Buffer
	t    testing.TB
}

// Start runs a server over db. cfg's DB and Logger are filled in; background work (revocation
// reloads, recovery sweeps) runs until the test ends. Unless cfg.Wrap is set, every response is
// checked against api/openapi.yaml, and one that does not match fails t (api/apitest).
func Start(t testing.TB, db *store.DB, cfg server.Config) *Server {
	t.Helper()
	log, logs := cardtest.Logger(t)
	cfg.DB, cfg.Logger = db, slog.New(httpapi.LogHandler(log.Handler()))
	if cfg.KEK == nil {
		cfg.KEK = NewKEK(t)
	}
	if cfg.Wrap == nil {
		cfg.Wrap = apitest.Middleware(t)
	}
	if cfg.MerchantCacheTTL == 0 {
		cfg.MerchantCacheTTL = time.Nanosecond // tests change settings and expect them at once
	}
	hs := httptest.NewUnstartedServer(nil)
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + hs.Listener.Addr().String()
	}
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		hs.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- srv.Serve(ctx, hs.Listener, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &Server{Server: srv, URL: "http://" + hs.Listener.Addr().String(), DB: db, Logs: logs, t: t}
}

// NewKEK returns a fresh random key-encryption key.
func NewKEK(t testing.TB) *envelope.KEK {
	t.Helper()
	k, err := envelope.ParseKEK(envelope.NewKEKText())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Merchant is a merchant of the test server with its first client-credential pair and a token.
type Merchant struct {
	ID     string
	Creds  auth.Credentials
	Token  string
	server *Server
}

var seq atomic.Int64

// NewMerchant creates a merchant with a unique e-mail address and gets it a token through the token
// endpoint with golang.org/x/oauth2.
func (s *Server) NewMerchant(t testing.TB) *Merchant {
	t.Helper()
	ctx := context.Background()
	email := "merchant" + strconv.FormatInt(seq.Add(1), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "@example.com"
	m := &Merchant{server: s}
	err := s.DB.Write(ctx, func(tx *store.Tx) error {
		mm, err := merchant.Create(ctx, tx, merchant.New{Name: "Test Shop", Email: email}, time.Now())
		if err != nil {
			return err
		}
		m.ID = mm.ID
		m.Creds, err = auth.CreateClient(ctx, tx, mm.ID, auth.DefaultValidity, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	m.NewToken(t)
	return m
}

// NewClient creates another client-credential pair of the merchant.
func (s *Server) NewClient(t testing.TB, merchantID string) auth.Credentials {
	t.Helper()
	var c auth.Credentials
	err := s.DB.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		c, err = auth.CreateClient(context.Background(), tx, merchantID, auth.DefaultValidity, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewClient returns the merchant with another client-credential pair of its own and its token: a
// second credential of the same merchant.
func (m *Merchant) NewClient(t testing.TB) *Merchant {
	t.Helper()
	other := &Merchant{ID: m.ID, Creds: m.server.NewClient(t, m.ID), server: m.server}
	other.NewToken(t)
	return other
}

// NewToken gets the merchant a fresh token, as a client does when its token has expired.
func (m *Merchant) NewToken(t testing.TB) {
	t.Helper()
	cfg := clientcredentials.Config{ClientID: m.Creds.ClientID, ClientSecret: m.Creds.ClientSecret, TokenURL: m.server.URL + "/oauth/token"}
	tok, err := cfg.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m.Token = tok.AccessToken
}

// NewAPIKey creates an API key of the account accountID ("acct_…") with permissions, as "kassa apikey
// create" does.
func (s *Server) NewAPIKey(t testing.TB, accountID string, p checkout.Permissions) checkout.NewKey {
	t.Helper()
	var k checkout.NewKey
	err := s.DB.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		k, err = checkout.CreateKey(context.Background(), tx, accountID, p, "", time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// NewPartner registers a partner with one callback URI, as "kassa partner create" does.
func (s *Server) NewPartner(t testing.TB) auth.PartnerCredentials {
	t.Helper()
	var p auth.PartnerCredentials
	err := s.DB.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		p, err = auth.CreatePartner(context.Background(), tx, auth.NewPartner{Name: "Plugin Co", ImageURL: "https://plugin.example/logo.png",
			CallbackURIs: []string{"https://plugin.example/callback"}}, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// PartnerTokens has the merchant approve the partner's client for scopes, as the consent page's
// "Allow access" does, and exchanges the authorization code at the token endpoint. It returns the
// token response: access_token, refresh_token, scope, merchant_id.
func (s *Server) PartnerTokens(t testing.TB, p auth.PartnerCredentials, merchantID string, scopes auth.Scopes) Response {
	t.Helper()
	ctx := context.Background()
	req, err := s.Auth().ParseAuthorizationRequest(ctx, url.Values{"response_type": {"code"}, "client_id": {p.ClientID},
		"scope": {scopes.String()}})
	if err != nil {
		t.Fatal(err)
	}
	code, err := s.Auth().Authorize(ctx, merchantID, req)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {req.RedirectURI}}
	r := s.Do(t, "POST", "/oauth/token", form.Encode(), "Content-Type", "application/x-www-form-urlencoded",
		"Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(p.ClientID+":"+p.ClientSecret)))
	if r.Status != http.StatusOK {
		t.Fatalf("exchange the code: %d %s", r.Status, r.Raw)
	}
	return r
}

// Update changes the merchant's settings.
func (m *Merchant) Update(t testing.TB, u merchant.Update) {
	t.Helper()
	err := m.server.DB.Write(context.Background(), func(tx *store.Tx) error {
		_, err := merchant.ApplyUpdate(context.Background(), tx, m.ID, u)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Response is a decoded JSON response.
type Response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// Do sends a request with the merchant's token. body may be nil, a string or a value to encode as
// JSON. hdr adds headers in pairs: "Idempotency-Key", "k1".
func (m *Merchant) Do(t testing.TB, method, path string, body any, hdr ...string) Response {
	t.Helper()
	return m.server.Do(t, method, path, body, append([]string{"Authorization", "Bearer " + m.Token}, hdr...)...)
}

// Do sends a request without a token.
func (s *Server) Do(t testing.TB, method, path string, body any, hdr ...string) Response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, s.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	cardtest.Check(t, method+" "+path+" response body", string(raw))
	out := Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(raw) > 0 {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&out.Body); err != nil {
			t.Fatalf("%s %s: response is not a JSON object: %v: %s", method, path, err, raw)
		}
	}
	return out
}

// Str returns a string field of the body ("" when absent).
func (r Response) Str(k string) string { s, _ := r.Body[k].(string); return s }

// Num returns a numeric field of the body as its JSON text ("" when absent).
func (r Response) Num(k string) string { n, _ := r.Body[k].(json.Number); return n.String() }

// Bool returns a boolean field of the body.
func (r Response) Bool(k string) bool { b, _ := r.Body[k].(bool); return b }

// WantRateLimit fails t unless r reports the velocity limit policy used up: RateLimit-Policy with its
// quota and window (seconds), RateLimit with nothing remaining, and Retry-After, both saying seconds.
func (r Response) WantRateLimit(t testing.TB, policy string, quota, window, seconds int) {
	t.Helper()
	name, h := `"`+policy+`"`, r.Header
	if h.Get("RateLimit-Policy") != fmt.Sprintf("%s;q=%d;w=%d", name, quota, window) ||
		h.Get("RateLimit") != fmt.Sprintf("%s;r=0;t=%d", name, seconds) || h.Get("Retry-After") != strconv.Itoa(seconds) {
		t.Fatalf("rate-limit headers: policy %q, limit %q, retry-after %q; want %s used up, %d per %d s, %d s to go",
			h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After"), policy, quota, window, seconds)
	}
}

// Parallel runs f n times concurrently and waits for all.
func Parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}

// HeapGrowth runs f and returns by how many MiB the live heap grew above where it stood before f, at
// its peak while f ran (sampled every millisecond): the bound a test of memory under concurrent
// requests holds the server to. The caller should not run in parallel with other tests, whose
// allocations would count.
func HeapGrowth(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return (peak.Load() - min(base, peak.Load())) >> 20
}
