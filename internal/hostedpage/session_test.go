package hostedpage_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/hostedpage"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(browsertest.Main(m)) }

const sessionsPath = "/v1/checkout/hosted-payment-page/sessions"

// shop is a merchant of a test server, as its own server sees Kassa: an API key with the six
// permissions the spec asks for.
type shop struct {
	srv     *servertest.Server
	m       *servertest.Merchant
	clock   *clock.Manual
	headers []string
}

func newShop(t *testing.T, db *store.DB) *shop { return newShopOn(t, db, server.Config{}) }

// newShopOn is newShop on a server configured by cfg, its clock the shop's.
func newShopOn(t *testing.T, db *store.DB, cfg server.Config) *shop {
	t.Helper()
	c := clock.NewManual(time.Now())
	cfg.Now = c.Now
	srv := servertest.Start(t, db, cfg)
	s := &shop{srv: srv, clock: c, m: srv.NewMerchant(t)}
	s.headers = []string{checkout.HeaderAPIKey, s.key(t, checkout.AllPermissions), checkout.HeaderAccount, "acct_" + s.m.ID}
	return s
}

// key creates an API key of the shop's account.
func (s *shop) key(t *testing.T, p checkout.Permissions) string {
	t.Helper()
	var k checkout.NewKey
	err := s.srv.DB.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		k, err = checkout.CreateKey(context.Background(), tx, "acct_"+s.m.ID, p, "", time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return k.Key
}

func (s *shop) do(t *testing.T, method, path string, body any, hdr ...string) servertest.Response {
	t.Helper()
	return s.srv.Do(t, method, path, body, append(append([]string{}, s.headers...), hdr...)...)
}

// session creates a session and returns the response.
func (s *shop) session(t *testing.T, body map[string]any) servertest.Response {
	t.Helper()
	r := s.do(t, "POST", sessionsPath, body)
	if r.Status != 200 {
		t.Fatalf("create a session: %d %s", r.Status, r.Raw)
	}
	return r
}

// page fetches a page URL as a browser in an iframe of referrer's page would.
func page(t *testing.T, u, referrer string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if referrer != "" {
		req.Header.Set("Referer", referrer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// state reads the page's state: the JSON its script starts from.
func state(t *testing.T, body string) map[string]any {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="application/json" id="hpp-state"[^>]*>(.*?)</script>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no page state in %s", body)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(m[1]), &out); err != nil {
		t.Fatalf("page state %q: %v", m[1], err)
	}
	return out
}

var tokenURL = regexp.MustCompile(`^http://127\.0\.0\.1:\d+/hpp/[A-Za-z0-9_-]{43}$`)

// The session endpoint takes a payment-intent body: billing_details is taken out (it prefills the
// form), payment_method_types is forced to card, every other field is validated as for an intent,
// and expand asks for the intent as an object.
func TestCreateSession(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		r := s.session(t, map[string]any{"amount": 1999, "currency": "cad", "capture_method": "automatic", "metadata": map[string]any{"order": "42"},
			"description": "Two books", "payment_method_types": []any{"card", "sepa_debit"},
			"billing_details": map[string]any{"name": "Ada Lovelace", "address": map[string]any{"city": "Toronto", "state": "ON", "zip": "M5V 2T6", "country": "ca"}}})
		if !strings.HasPrefix(r.Str("id"), "cs_") || !strings.HasPrefix(r.Str("payment_intent"), "pi_") || !tokenURL.MatchString(r.Str("url")) ||
			r.Num("expires_at") != strconv.FormatInt(s.clock.Now().Add(time.Hour).Unix(), 10) {
			t.Fatalf("session: %s", r.Raw)
		}
		in := s.do(t, "GET", "/v1/payment-intents/"+r.Str("payment_intent"), nil)
		if in.Status != 200 || in.Str("status") != "requires_payment_method" || in.Num("amount") != "1999" || in.Str("currency") != "cad" ||
			!strings.Contains(string(in.Raw), `"payment_method_types":["card"]`) || !strings.Contains(string(in.Raw), `"metadata":{"order":"42"}`) ||
			strings.Contains(string(in.Raw), "Lovelace") {
			t.Fatalf("the session's intent: %s", in.Raw)
		}
		// The page is prefilled from billing_details; the URL's secret is stored only as a hash.
		_, _, body := page(t, r.Str("url"), "")
		if st := state(t, body); st["state"] != "open" || st["prefill"].(map[string]any)["name"] != "Ada Lovelace" ||
			st["prefill"].(map[string]any)["postal_code"] != "M5V 2T6" {
			t.Fatalf("page state %v", st)
		}
		secret := r.Str("url")[strings.LastIndex(r.Str("url"), "/")+1:]
		var n int
		db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM checkout_sessions WHERE session_id = $1`, r.Str("id")).Scan(&n)
		var stored string
		db.Reader().QueryRowContext(context.Background(), `SELECT session_id || billing_details || attempts FROM checkout_sessions`).Scan(&stored)
		if n != 1 || strings.Contains(stored, secret) {
			t.Fatal("the session is missing, or its URL's secret is stored as it is")
		}
		if other := s.session(t, map[string]any{"amount": 100, "currency": "cad"}); other.Str("url") == r.Str("url") {
			t.Fatal("two sessions share a URL")
		}

		// expand, in the query string or the body.
		for _, tc := range []struct {
			path string
			body map[string]any
		}{
			{sessionsPath + "?expand=payment_intent", map[string]any{"amount": 500, "currency": "usd"}},
			{sessionsPath, map[string]any{"amount": 500, "currency": "usd", "expand": []any{"payment_intent"}}},
		} {
			e := s.do(t, "POST", tc.path, tc.body)
			pi, _ := e.Body["payment_intent"].(map[string]any)
			if e.Status != 200 || pi == nil || pi["object"] != "payment_intent" || pi["status"] != "requires_payment_method" || pi["currency"] != "usd" {
				t.Fatalf("expand: %d %s", e.Status, e.Raw)
			}
		}

		// Validated as a payment intent; billing_details as the spec describes it.
		for _, tc := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"currency": "cad"}, "amount"},
			{map[string]any{"amount": 10.5, "currency": "cad"}, "amount"},
			{map[string]any{"amount": 0, "currency": "cad"}, "amount"},
			{map[string]any{"amount": 100, "currency": "CAD"}, "currency"},
			{map[string]any{"amount": 100, "currency": "eur"}, "currency"},
			{map[string]any{"amount": 100, "currency": "cad", "capture_method": "later"}, "capture_method"},
			{map[string]any{"amount": 100, "currency": "cad", "customer": "cus_1"}, "customer"},
			{map[string]any{"amount": 100, "currency": "cad", "metadata": map[string]any{"k": 5}}, "metadata"},
			{map[string]any{"amount": 100, "currency": "cad", "billing_details": map[string]any{"address": map[string]any{"line1": "1 Main"}}}, "billing_details.address.line1"},
			{map[string]any{"amount": 100, "currency": "cad", "billing_details": map[string]any{"name": strings.Repeat("n", 201)}}, "billing_details.name"},
			{map[string]any{"amount": 100, "currency": "cad", "billing_details": "Ada"}, "billing_details"},
			{map[string]any{"amount": 100, "currency": "cad", "billing_details": map[string]any{"address": map[string]any{"zip": "1", "postal_code": "2"}}},
				"billing_details.address.postal_code"},
			{map[string]any{"amount": 100, "currency": "cad", "billing_details": map[string]any{"address": map[string]any{"zip": strings.Repeat("9", 21)}}},
				"billing_details.address.zip"},
			{map[string]any{"amount": 100, "currency": "cad", "billing_details": map[string]any{"address": map[string]any{"postal_code": strings.Repeat("9", 21)}}},
				"billing_details.address.postal_code"},
			{map[string]any{"amount": 100, "currency": "cad", "expand": []any{"customer"}}, "expand"},
		} {
			if r := s.do(t, "POST", sessionsPath, tc.body); r.Status != 400 || r.Str("field") != tc.field {
				t.Errorf("%v: %d %s; want 400 naming %s", tc.body, r.Status, r.Raw, tc.field)
			}
		}
		if r := s.do(t, "POST", sessionsPath, "[1]"); r.Status != 400 {
			t.Errorf("a body that is not an object: %d", r.Status)
		}

		// Rule 2: the key needs all six permissions; the account header decides whose intent it is.
		weak := s.key(t, checkout.AllPermissions&^checkout.APIKeysRead)
		if r := s.srv.Do(t, "POST", sessionsPath, map[string]any{"amount": 100, "currency": "cad"}, checkout.HeaderAPIKey, weak,
			checkout.HeaderAccount, "acct_"+s.m.ID); r.Status != 403 || !strings.Contains(r.Str("message"), "api_keys:read") {
			t.Fatalf("a key without api_keys:read: %d %s", r.Status, r.Raw)
		}
		if r := s.srv.Do(t, "POST", sessionsPath, map[string]any{"amount": 100, "currency": "cad"}); r.Status != 401 {
			t.Fatalf("no key: %d", r.Status)
		}

		// Idempotency-Key: a retry is the same session.
		a := s.do(t, "POST", sessionsPath, map[string]any{"amount": 700, "currency": "cad"}, "Idempotency-Key", "order-7")
		b := s.do(t, "POST", sessionsPath, map[string]any{"amount": 700, "currency": "cad"}, "Idempotency-Key", "order-7")
		if a.Status != 200 || string(a.Raw) != string(b.Raw) {
			t.Fatalf("retried session: %s / %s", a.Raw, b.Raw)
		}
		// Another key of the account with the same Idempotency-Key gets a session of its own, not the
		// first key's secret URL: idempotency records are the credential's own.
		other := s.do(t, "POST", sessionsPath, map[string]any{"amount": 700, "currency": "cad"}, "Idempotency-Key", "order-7",
			checkout.HeaderAPIKey, s.key(t, checkout.AllPermissions))
		if other.Status != 200 || other.Str("url") == a.Str("url") || other.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("another key's session: %s / %s", other.Raw, a.Raw)
		}
	})
}

// The page's headers: frame-ancestors from the merchant's allowed origins (by default any https
// origin and localhost), no cookie; its messages go only to an allowed referrer's origin; an unknown
// URL is the error state; after an hour the page has expired.
func TestPageHeadersAndStates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		u := s.session(t, map[string]any{"amount": 1000, "currency": "cad"}).Str("url")
		status, h, body := page(t, u, "https://shop.example/checkout?order=1")
		csp := h.Get("Content-Security-Policy")
		if status != 200 || !strings.Contains(csp, "frame-ancestors "+merchant.DefaultFrameAncestors) || !strings.Contains(csp, "default-src 'none'") ||
			!strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") || h.Get("Set-Cookie") != "" {
			t.Fatalf("page: %d, CSP %q, cookie %q", status, csp, h.Get("Set-Cookie"))
		}
		for _, want := range []string{`autocomplete="cc-number"`, `autocomplete="cc-exp"`, `autocomplete="cc-csc"`, `autocomplete="cc-name"`,
			`<label for="card-number">`, `role="alert"`, "CA$10.00", `id="cancel-button"`} {
			if !strings.Contains(body, want) {
				t.Errorf("the page lacks %s", want)
			}
		}
		if st := state(t, body); st["parent_origin"] != "https://shop.example" || st["state"] != "open" {
			t.Fatalf("state %v", st)
		}
		for _, ref := range []string{"http://evil.example/", "", "not a url"} {
			if _, _, body := page(t, u, ref); state(t, body)["parent_origin"] != "" {
				t.Errorf("referrer %q became a message target", ref)
			}
		}

		s.m.Update(t, merchant.Update{AllowedOrigins: []string{"https://shop.example"}})
		s.clock.Advance(time.Second) // the merchant cache counts by the server's clock
		_, h, body = page(t, u, "https://other.example/")
		if !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors https://shop.example") || state(t, body)["parent_origin"] != "" {
			t.Fatalf("with allowed origins: CSP %q, state %v", h.Get("Content-Security-Policy"), state(t, body))
		}

		status, _, body = page(t, s.srv.URL+"/hpp/"+strings.Repeat("A", 43), "https://shop.example/")
		if st := state(t, body); status != 404 || st["state"] != "error" || st["error"].(map[string]any)["code"] != "session_not_found" ||
			strings.Contains(body, `id="card-form"`) {
			t.Fatalf("unknown session: %d %v", status, st)
		}

		// An intent that ended through the API ends its session too.
		other := s.session(t, map[string]any{"amount": 1000, "currency": "cad"})
		s.do(t, "POST", "/v1/payment-intents/"+other.Str("payment_intent")+"/cancel", map[string]any{})
		if st := state(t, mustPage(t, other.Str("url"))); st["state"] != "canceled" || st["result"].(map[string]any)["outcome"] != "canceled" {
			t.Fatalf("the page of a canceled intent: %v", st)
		}
		s.clock.Advance(time.Hour)
		if st := state(t, mustPage(t, u)); st["state"] != "expired" {
			t.Fatalf("after an hour: %v", st)
		}
		pay := s.srv.Do(t, "POST", strings.Replace(u, s.srv.URL, "", 1)+"/pay", map[string]any{})
		if pay.Status != 410 || pay.Str("error") != "session_expired" {
			t.Fatalf("paying an expired session: %d %s", pay.Status, pay.Raw)
		}
	})
}

// The merchant's allowed origins go into the page's frame-ancestors rebuilt from their parsed scheme,
// host and port: an origin stored with a ";" or a quote in its host (by an older version, or by hand)
// cannot add a directive or a source to the page's Content-Security-Policy.
func TestFrameAncestorsAreRebuilt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		if _, err := db.Raw().ExecContext(context.Background(), `UPDATE merchants SET allowed_origins = $1 WHERE id = $2`,
			`https://shop.example;script-src 'unsafe-inline' HTTPS://Good.Example:8443 https://q.example"`, s.m.ID); err != nil {
			t.Fatal(err)
		}
		u := s.session(t, map[string]any{"amount": 1000, "currency": "cad"}).Str("url")
		status, h, _ := page(t, u, "https://good.example:8443/")
		csp := h.Get("Content-Security-Policy")
		if status != 200 || !strings.HasSuffix(csp, "; frame-ancestors https://good.example:8443") || strings.Count(csp, "script-src") != 1 ||
			strings.Contains(csp, "unsafe") || strings.Contains(csp, `"`) {
			t.Fatalf("page: %d, CSP %q", status, csp)
		}
	})
}

func mustPage(t *testing.T, u string) string {
	t.Helper()
	_, _, body := page(t, u, "")
	return body
}

// A session takes at most MaxAttempts tries: its URL cannot serve to test cards one after another.
func TestAttemptsAreBounded(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t))
	path := strings.Replace(s.session(t, map[string]any{"amount": 1000, "currency": "cad"}).Str("url"), s.srv.URL, "", 1) + "/pay"
	card := map[string]any{"type": "card", "card": map[string]any{"number": cardtest.Declined, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}
	for i := range hostedpage.MaxAttempts {
		if r := s.srv.Do(t, "POST", path, card); r.Status != 200 || r.Str("outcome") != "failed" || len(r.Body["attempts"].([]any)) != i+1 {
			t.Fatalf("try %d: %d %s", i+1, r.Status, r.Raw)
		}
	}
	card["card"].(map[string]any)["number"] = cardtest.Visa
	if r := s.srv.Do(t, "POST", path, card); r.Status != 429 || r.Str("error") != "too_many_attempts" {
		t.Fatalf("one try more: %d %s", r.Status, r.Raw)
	}
}

// A session's billing address takes its postal code as zip (the spec's name) or as postal_code (the
// payment method's), or both when they agree; the page is prefilled with it either way.
func TestSessionPostalCode(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		for _, addr := range []map[string]any{
			{"zip": "M5V 2T6"}, {"postal_code": "M5V 2T6"}, {"zip": "M5V 2T6", "postal_code": "M5V 2T6"},
		} {
			r := s.session(t, map[string]any{"amount": 1000, "currency": "cad", "billing_details": map[string]any{"address": addr}})
			_, _, body := page(t, r.Str("url"), "")
			if st := state(t, body); st["prefill"].(map[string]any)["postal_code"] != "M5V 2T6" {
				t.Fatalf("%v: page state %v", addr, st)
			}
		}
	})
}

// The page's payment sent again to a session it completed — a retry after the first answer was lost
// with its node, a double submission — is answered with the completed result, and charges nothing;
// canceling a completed session is still a 409 (the reliability drill found retries told
// session_ended).
func TestPayingACompletedSessionAgain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		path := strings.Replace(s.session(t, map[string]any{"amount": 1500, "currency": "cad"}).Str("url"), s.srv.URL, "", 1)
		card := map[string]any{"type": "card", "card": map[string]any{"number": cardtest.Visa, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}
		first := s.srv.Do(t, "POST", path+"/pay", card)
		if first.Status != 200 || first.Str("outcome") != "completed" {
			t.Fatalf("pay: %d %s", first.Status, first.Raw)
		}
		again := s.srv.Do(t, "POST", path+"/pay", card)
		pi := func(r servertest.Response) map[string]any {
			m, _ := r.Body["payment_intent"].(map[string]any)
			return m
		}
		if again.Status != 200 || again.Str("outcome") != "completed" || pi(again)["id"] != pi(first)["id"] ||
			pi(again)["latest_charge"] != pi(first)["latest_charge"] || pi(again)["status"] != "succeeded" {
			t.Fatalf("paying the completed session again: %d %s\nfirst: %s", again.Status, again.Raw, first.Raw)
		}
		var sales int
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1`, s.m.ID).Scan(&sales); err != nil || sales != 1 {
			t.Fatalf("%d transactions after paying twice, want 1 (%v)", sales, err)
		}
		if c := s.srv.Do(t, "POST", path+"/cancel", map[string]any{}); c.Status != 409 || c.Str("error") != "session_ended" {
			t.Fatalf("canceling the completed session: %d %s", c.Status, c.Raw)
		}
	})
}

// A payment whose charge settled while its session was not recorded — the node stopped between the
// two writes, and the page (or a client) posts again — is answered with the settled result, charges
// nothing, and completes the session then (the reliability drill found such a retry told 409
// payment_intent_unexpected_state).
func TestPayingAfterTheSessionRecordWasLost(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db)
		ss := s.session(t, map[string]any{"amount": 1700, "currency": "cad"})
		path := strings.Replace(ss.Str("url"), s.srv.URL, "", 1)
		card := map[string]any{"type": "card", "card": map[string]any{"number": cardtest.Visa, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}
		// The charge of the first post, without the session's record of it.
		pm := s.do(t, "POST", "/v1/payment-methods", card)
		charged := s.do(t, "POST", "/v1/payment-intents/"+ss.Str("payment_intent")+"/confirm", map[string]any{"payment_method_id": pm.Str("id")})
		if pm.Status != 200 || charged.Status != 200 || charged.Str("status") != "succeeded" {
			t.Fatalf("charge the session's intent: %d %s / %d %s", pm.Status, pm.Raw, charged.Status, charged.Raw)
		}
		again := s.srv.Do(t, "POST", path+"/pay", card)
		pi, _ := again.Body["payment_intent"].(map[string]any)
		if again.Status != 200 || again.Str("outcome") != "completed" || pi["id"] != ss.Str("payment_intent") ||
			pi["latest_charge"] != charged.Str("latest_charge") || pi["status"] != "succeeded" {
			t.Fatalf("the page's post after the lost record: %d %s", again.Status, again.Raw)
		}
		var sales int
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1`, s.m.ID).Scan(&sales); err != nil || sales != 1 {
			t.Fatalf("%d transactions, want 1 (%v)", sales, err)
		}
		var outcome string
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT COALESCE(outcome, '') FROM checkout_sessions WHERE session_id = $1`,
			ss.Str("id")).Scan(&outcome); err != nil || outcome != "completed" {
			t.Fatalf("the session's outcome after the post: %q (%v)", outcome, err)
		}
		if r := s.srv.Do(t, "POST", path+"/cancel", map[string]any{}); r.Status != 409 || r.Str("error") != "session_ended" {
			t.Fatalf("canceling the completed session: %d %s", r.Status, r.Raw)
		}

		// A page that never posts again: the sweep, at the session's hour, completes it instead of
		// expiring it, with the completed event.
		left := s.session(t, map[string]any{"amount": 1800, "currency": "cad"})
		pm = s.do(t, "POST", "/v1/payment-methods", card)
		if r := s.do(t, "POST", "/v1/payment-intents/"+left.Str("payment_intent")+"/confirm", map[string]any{"payment_method_id": pm.Str("id")}); r.Str("status") != "succeeded" {
			t.Fatalf("charge the second session's intent: %d %s", r.Status, r.Raw)
		}
		s.clock.Advance(hostedpage.Lifetime + 5*time.Minute)
		for range 2 {
			if err := s.srv.HostedPages().Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		var types []string
		rows, err := db.Reader().QueryContext(context.Background(), `SELECT type FROM events WHERE merchant_id = $1 AND type LIKE 'hosted_page.%' ORDER BY id`, s.m.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var ty string
			if err := rows.Scan(&ty); err != nil {
				t.Fatal(err)
			}
			types = append(types, ty)
		}
		if want := "hosted_page.session.completed hosted_page.session.completed"; strings.Join(types, " ") != want {
			t.Fatalf("hosted-page events %v, want %s (the first session's, then the swept one's)", types, want)
		}
		_, _, body := page(t, left.Str("url"), "")
		if st := state(t, body); st["state"] != "completed" {
			t.Fatalf("the swept session's page: state %v", st["state"])
		}
	})
}
