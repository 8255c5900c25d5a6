package webhook_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/webhook"
)

// account is a merchant of a test server with a v1 API key of its own account.
type account struct {
	srv *servertest.Server
	id  string // the merchant's id
	hdr []string
}

// newAccount creates a merchant with a key holding permissions p.
func newAccount(t *testing.T, srv *servertest.Server, p checkout.Permissions) *account {
	t.Helper()
	m := srv.NewMerchant(t)
	return &account{srv: srv, id: m.ID, hdr: []string{checkout.HeaderAPIKey, srv.NewAPIKey(t, "acct_"+m.ID, p).Key, checkout.HeaderAccount, "acct_" + m.ID}}
}

// withKey is the account acting with another key of its own, holding p.
func (a *account) withKey(t *testing.T, p checkout.Permissions) *account {
	t.Helper()
	return &account{srv: a.srv, id: a.id, hdr: []string{checkout.HeaderAPIKey, a.srv.NewAPIKey(t, "acct_"+a.id, p).Key, checkout.HeaderAccount, "acct_" + a.id}}
}

func (a *account) do(t *testing.T, method, path string, body any, hdr ...string) servertest.Response {
	t.Helper()
	return a.srv.Do(t, method, path, body, append(append([]string{}, a.hdr...), hdr...)...)
}

// ok is do that fails t unless the answer is 200.
func (a *account) ok(t *testing.T, method, path string, body any, hdr ...string) servertest.Response {
	t.Helper()
	r := a.do(t, method, path, body, hdr...)
	if r.Status != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
	}
	return r
}

// create makes an endpoint subscribed to every event and returns its answer.
func (a *account) create(t *testing.T, url string) servertest.Response {
	t.Helper()
	return a.ok(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": url, "enabled_events": []string{"*"}})
}

// wantError fails t unless r is the error status with the code and field.
func wantError(t *testing.T, r servertest.Response, status int, code, field string) {
	t.Helper()
	if r.Status != status || r.Str("error") != code || r.Str("field") != field || r.Str("message") == "" {
		t.Fatalf("got %d %s; want %d %s field %q with a message", r.Status, r.Raw, status, code, field)
	}
}

func events(r servertest.Response) string {
	var out []string
	for _, e := range r.Body["enabled_events"].([]any) {
		out = append(out, e.(string))
	}
	return strings.Join(out, " ")
}

// /v1/webhook-endpoints creates, lists, gets, updates and deletes endpoints (permissions
// webhooks:write and webhooks:read), each with url, enabled_events (types, or *), description and
// disabled.
func TestEndpointLifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{})
		a := newAccount(t, srv, checkout.WebhooksRead|checkout.WebhooksWrite)
		before := time.Now().Unix()
		c := a.ok(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": "https://shop.example/hooks?from=kassa",
			"enabled_events": []string{"customer.created", "transaction.approved", "customer.created"}, "description": "  Orders  "})
		id := c.Str("id")
		created, _ := strconv.ParseInt(c.Num("created"), 10, 64)
		if !strings.HasPrefix(id, "we_") || c.Str("object") != "webhook_endpoint" || c.Str("url") != "https://shop.example/hooks?from=kassa" ||
			c.Str("description") != "Orders" || c.Bool("disabled") || c.Str("disabled_reason") != "" || created < before {
			t.Fatalf("created %s", c.Raw)
		}
		// Types are kept once each, in the documentation's order.
		if events(c) != "transaction.approved customer.created" {
			t.Errorf("enabled_events %q", events(c))
		}
		secret := c.Str("secret")
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); !strings.HasPrefix(secret, "whsec_") || err != nil || len(raw) != 32 {
			t.Fatalf("secret %q: want whsec_ and the base64 of 32 bytes", secret)
		}
		if got := a.ok(t, "GET", "/v1/webhook-endpoints/"+id+"/secret", nil).Str("secret"); got != secret {
			t.Errorf("/secret gives another secret than the creation's")
		}
		g := a.ok(t, "GET", "/v1/webhook-endpoints/"+id, nil)
		if g.Str("id") != id || g.Str("secret") != "" || g.Num("created") != c.Num("created") {
			t.Errorf("get: %s", g.Raw)
		}
		second := a.create(t, "https://shop.example/other")
		l := a.ok(t, "GET", "/v1/webhook-endpoints", nil)
		data := l.Body["data"].([]any)
		if l.Str("object") != "list" || len(data) != 2 || data[0].(map[string]any)["id"] != second.Str("id") || data[1].(map[string]any)["id"] != id ||
			strings.Contains(string(l.Raw), "whsec_") {
			t.Fatalf("list: %s", l.Raw)
		}

		u := a.ok(t, "PATCH", "/v1/webhook-endpoints/"+id, map[string]any{"enabled_events": []string{"*"}, "disabled": true})
		if events(u) != "*" || !u.Bool("disabled") || u.Str("url") != "https://shop.example/hooks?from=kassa" || u.Str("description") != "Orders" {
			t.Fatalf("update: %s", u.Raw)
		}
		u = a.ok(t, "PATCH", "/v1/webhook-endpoints/"+id, map[string]any{"url": "https://shop.example/v2", "description": "", "disabled": false})
		if u.Str("url") != "https://shop.example/v2" || u.Str("description") != "" || u.Bool("disabled") || events(u) != "*" {
			t.Fatalf("update: %s", u.Raw)
		}

		d := a.ok(t, "DELETE", "/v1/webhook-endpoints/"+id, nil)
		if d.Str("id") != id || !d.Bool("deleted") {
			t.Fatalf("delete: %s", d.Raw)
		}
		wantError(t, a.do(t, "GET", "/v1/webhook-endpoints/"+id, nil), 404, "not_found", "")
		wantError(t, a.do(t, "DELETE", "/v1/webhook-endpoints/"+id, nil), 404, "not_found", "")
		if n := len(a.ok(t, "GET", "/v1/webhook-endpoints", nil).Body["data"].([]any)); n != 1 {
			t.Errorf("%d endpoints after the delete, want 1", n)
		}
		// Each change is in the audit log, as the API key's.
		var n int
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM audit_log WHERE merchant_id = $1
			AND operation LIKE 'webhook_endpoint.%' AND resource = $2 AND client_id IS NOT NULL`, a.id, "webhook_endpoint/"+id).Scan(&n); err != nil || n != 4 {
			t.Errorf("%d audit records of the endpoint (%v), want 4: create, two updates, delete", n, err)
		}
	})
}

// Each bad field is a 400 that names it; an unknown event type is named in the message.
func TestEndpointValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{})
		a := newAccount(t, srv, checkout.WebhooksWrite)
		all := []string{"*"}
		for _, tc := range []struct {
			name  string
			body  map[string]any
			field string
		}{
			{"no url", map[string]any{"enabled_events": all}, "url"},
			{"an empty url", map[string]any{"url": "", "enabled_events": all}, "url"},
			{"http", map[string]any{"url": "http://shop.example/hooks", "enabled_events": all}, "url"},
			{"http to loopback", map[string]any{"url": "http://127.0.0.1:8000/kassa/webhooks", "enabled_events": all}, "url"},
			{"another scheme", map[string]any{"url": "ftp://shop.example/hooks", "enabled_events": all}, "url"},
			{"a relative url", map[string]any{"url": "/hooks", "enabled_events": all}, "url"},
			{"no host", map[string]any{"url": "https:///hooks", "enabled_events": all}, "url"},
			{"credentials", map[string]any{"url": "https://user:pass@shop.example/hooks", "enabled_events": all}, "url"},
			{"a user name", map[string]any{"url": "https://user@shop.example/hooks", "enabled_events": all}, "url"},
			{"a space", map[string]any{"url": "https://shop.example/a hook", "enabled_events": all}, "url"},
			{"too long", map[string]any{"url": "https://shop.example/" + strings.Repeat("a", 2049-len("https://shop.example/")), "enabled_events": all}, "url"},
			{"a url of the wrong type", map[string]any{"url": 1, "enabled_events": all}, "url"},
			{"no events", map[string]any{"url": "https://shop.example/"}, "enabled_events"},
			{"an empty list", map[string]any{"url": "https://shop.example/", "enabled_events": []string{}}, "enabled_events"},
			{"an unknown type", map[string]any{"url": "https://shop.example/", "enabled_events": []string{"customer.created", "charge.succeeded"}}, "enabled_events"},
			{"a prefix", map[string]any{"url": "https://shop.example/", "enabled_events": []string{"customer.*"}}, "enabled_events"},
			{"* and a type", map[string]any{"url": "https://shop.example/", "enabled_events": []string{"*", "customer.created"}}, "enabled_events"},
			{"events as text", map[string]any{"url": "https://shop.example/", "enabled_events": "*"}, "enabled_events"},
			{"a long description", map[string]any{"url": "https://shop.example/", "enabled_events": all, "description": strings.Repeat("é", 501)}, "description"},
			{"a control character", map[string]any{"url": "https://shop.example/", "enabled_events": all, "description": "a\x07b"}, "description"},
			{"disabled as text", map[string]any{"url": "https://shop.example/", "enabled_events": all, "disabled": "yes"}, "disabled"},
			{"an unknown field", map[string]any{"url": "https://shop.example/", "enabled_events": all, "secret": "whsec_x"}, "secret"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := a.do(t, "POST", "/v1/webhook-endpoints", tc.body)
				code := "invalid_request"
				if tc.field == "secret" {
					code = "unknown_field"
				}
				wantError(t, r, 400, code, tc.field)
				if tc.name == "an unknown type" && !strings.Contains(r.Str("message"), "charge.succeeded") {
					t.Errorf("the message does not name the type: %s", r.Raw)
				}
			})
		}
		// A URL of exactly 2,048 characters is accepted; an update is checked as a creation is.
		long := "https://shop.example/" + strings.Repeat("a", 2048-len("https://shop.example/"))
		id := a.ok(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": long, "enabled_events": all}).Str("id")
		wantError(t, a.do(t, "PATCH", "/v1/webhook-endpoints/"+id, map[string]any{"url": "http://shop.example/"}), 400, "invalid_request", "url")
		wantError(t, a.do(t, "PATCH", "/v1/webhook-endpoints/"+id, map[string]any{"enabled_events": []string{"plan.renamed"}}), 400, "invalid_request", "enabled_events")
		if n := count(t, db, `SELECT COUNT(*) FROM webhook_endpoints WHERE merchant_id = $1`, a.id); n != 1 {
			t.Errorf("%d endpoints stored, want only the valid one", n)
		}
	})
}

// http:// is accepted only when the server lets webhooks go to addresses that are not public
// (`--webhooks-allow-private`), which is also how the tests deliver to 127.0.0.1: a receiver on the
// developer's machine, plain HTTP on loopback, gets each event signed as every delivery is. Without
// the flag such a URL is refused at creation, naming url (TestEndpointValidation).
func TestEndpointHTTPWhenPrivateAllowed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		h := newHooks(t)
		target := h.srv.URL + "/hooks"

		srv := servertest.Start(t, db, server.Config{WebhooksAllowPrivate: true, WebhookPoll: 20 * time.Millisecond})
		a := newAccount(t, srv, checkout.WebhooksWrite)
		created := a.create(t, target)
		if u := created.Str("url"); u != target {
			t.Fatalf("url %q", u)
		}
		h.mu.Lock()
		h.secrets["/hooks"] = created.Str("secret")
		h.mu.Unlock()
		wantError(t, a.do(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": "http://u:p@127.0.0.1/", "enabled_events": []string{"*"}}),
			400, "invalid_request", "url")
		if err := db.Write(ctx, func(tx *store.Tx) error {
			return event.Record(ctx, tx, a.id, event.CustomerCreated, map[string]string{"id": "cus_local"}, time.Now())
		}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got, bad := h.received("/hooks")
			if len(bad) > 0 {
				t.Fatalf("deliveries that do not verify under the endpoint's secret: %v", bad)
			}
			if len(got) == 1 {
				for _, msg := range got {
					if msg["type"] != event.CustomerCreated {
						t.Fatalf("delivered %v", msg)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the http:// receiver on 127.0.0.1 got %d deliveries in 20 s, want 1", len(got))
			}
		}
	})
}

// "At most 16 endpoints per merchant": the 17th is a 409, and another merchant's count is its own.
func TestEndpointLimit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{})
		a := newAccount(t, srv, checkout.WebhooksRead|checkout.WebhooksWrite)
		for i := range webhook.MaxEndpoints {
			a.create(t, "https://shop.example/"+strconv.Itoa(i))
		}
		r := a.do(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": "https://shop.example/x", "enabled_events": []string{"*"}})
		wantError(t, r, 409, "too_many_endpoints", "")
		if !strings.Contains(r.Str("message"), "16") {
			t.Errorf("message %q does not say the limit", r.Str("message"))
		}
		newAccount(t, srv, checkout.WebhooksWrite).create(t, "https://other.example/")
		// Deleting one makes room again.
		first := a.ok(t, "GET", "/v1/webhook-endpoints", nil).Body["data"].([]any)[0].(map[string]any)["id"].(string)
		a.ok(t, "DELETE", "/v1/webhook-endpoints/"+first, nil)
		a.create(t, "https://shop.example/again")
	})
}

// Two creations cannot both take the last place: a creation waits for one in progress of the same
// merchant (its lock on the merchant's row) and then counts what it committed.
func TestEndpointLimitUnderRace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		srv := servertest.Start(t, db, server.Config{})
		a := newAccount(t, srv, checkout.WebhooksWrite)
		for i := range webhook.MaxEndpoints - 1 {
			a.create(t, "https://shop.example/"+strconv.Itoa(i))
		}
		// Another creation holds the merchant's lock, its 16th endpoint written but not committed.
		tx, err := db.Raw().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `UPDATE merchants SET created_at = created_at WHERE id = $1`, a.id); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_endpoints (endpoint_id, merchant_id, url, enabled_events, secret, created_at, updated_at)
			VALUES ('we_racing', $1, 'https://shop.example/r', '*', $2, 0, 0)`, a.id, []byte{1}); err != nil {
			t.Fatal(err)
		}
		done := make(chan int, 1)
		go func() {
			done <- a.do(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": "https://shop.example/x", "enabled_events": []string{"*"}}).Status
		}()
		select {
		case s := <-done:
			t.Fatalf("a creation answered %d while another held the merchant's lock", s)
		case <-time.After(300 * time.Millisecond):
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if s := <-done; s != 409 {
			t.Fatalf("the creation that waited answered %d, want 409", s)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM webhook_endpoints WHERE merchant_id = $1`, a.id); n != webhook.MaxEndpoints {
			t.Fatalf("%d endpoints, want %d", n, webhook.MaxEndpoints)
		}
	})
}

// One merchant never sees another's endpoints: every route answers 404, as for an endpoint that does
// not exist, and changes nothing.
func TestEndpointsOfAnotherMerchant(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{})
		a := newAccount(t, srv, checkout.AllPermissions)
		b := newAccount(t, srv, checkout.AllPermissions)
		id := a.create(t, "https://a.example/").Str("id")
		d := deliver(t, db, a.id, id)
		for _, tc := range []struct{ method, path string }{
			{"GET", "/v1/webhook-endpoints/" + id},
			{"PATCH", "/v1/webhook-endpoints/" + id},
			{"DELETE", "/v1/webhook-endpoints/" + id},
			{"GET", "/v1/webhook-endpoints/" + id + "/secret"},
			{"POST", "/v1/webhook-endpoints/" + id + "/secret/rotate"},
			{"GET", "/v1/webhook-endpoints/" + id + "/deliveries"},
			{"POST", "/v1/webhook-endpoints/" + id + "/deliveries/" + d + "/resend"},
		} {
			var body any
			if tc.method != "GET" {
				body = map[string]any{}
			}
			wantError(t, b.do(t, tc.method, tc.path, body), 404, "not_found", "")
			if strings.Contains(b.do(t, tc.method, tc.path, body).Str("message"), "a.example") {
				t.Errorf("%s %s tells of the other merchant's endpoint", tc.method, tc.path)
			}
		}
		if l := b.ok(t, "GET", "/v1/webhook-endpoints", nil); len(l.Body["data"].([]any)) != 0 {
			t.Errorf("b lists %s", l.Raw)
		}
		if a.ok(t, "GET", "/v1/webhook-endpoints/"+id, nil).Str("url") != "https://a.example/" ||
			count(t, db, `SELECT COUNT(*) FROM webhook_deliveries`) != 1 {
			t.Error("b's requests changed a's endpoint")
		}
	})
}

// Reading needs webhooks:read; creating, changing, deleting, reading or rotating the secret and
// resending need webhooks:write. A key without the permission is a 403 naming it.
func TestEndpointPermissions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{})
		a := newAccount(t, srv, checkout.WebhooksRead|checkout.WebhooksWrite)
		id := a.create(t, "https://a.example/").Str("id")
		d := deliver(t, db, a.id, id)
		reader := a.withKey(t, checkout.WebhooksRead)
		writer := a.withKey(t, checkout.WebhooksWrite)
		others := a.withKey(t, checkout.AllPermissions&^(checkout.WebhooksRead|checkout.WebhooksWrite))
		for _, tc := range []struct {
			method, path string
			need         string
		}{
			{"POST", "/v1/webhook-endpoints", "webhooks:write"},
			{"GET", "/v1/webhook-endpoints", "webhooks:read"},
			{"GET", "/v1/webhook-endpoints/" + id, "webhooks:read"},
			{"PATCH", "/v1/webhook-endpoints/" + id, "webhooks:write"},
			{"DELETE", "/v1/webhook-endpoints/" + id, "webhooks:write"},
			{"GET", "/v1/webhook-endpoints/" + id + "/secret", "webhooks:write"},
			{"POST", "/v1/webhook-endpoints/" + id + "/secret/rotate", "webhooks:write"},
			{"GET", "/v1/webhook-endpoints/" + id + "/deliveries", "webhooks:read"},
			{"POST", "/v1/webhook-endpoints/" + id + "/deliveries/" + d + "/resend", "webhooks:write"},
		} {
			var body any
			if tc.method != "GET" {
				body = map[string]any{}
			}
			refused := []*account{others, writer}
			if tc.need == "webhooks:write" {
				refused = []*account{others, reader}
			}
			for _, k := range refused {
				r := k.do(t, tc.method, tc.path, body)
				wantError(t, r, 403, "insufficient_permissions", "")
				if !strings.Contains(r.Str("message"), tc.need) {
					t.Errorf("%s %s: the 403 does not name %s: %s", tc.method, tc.path, tc.need, r.Raw)
				}
			}
		}
		if reader.ok(t, "GET", "/v1/webhook-endpoints/"+id, nil).Str("id") != id {
			t.Error("webhooks:read does not read")
		}
	})
}

// count runs a COUNT query.
func count(t *testing.T, db *store.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
