package webhook_test

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/webhook"
	"github.com/kassapay/kassa/internal/webhook/webhooktest"
)

// deliver records a customer.created event of the merchant, which queues its delivery to the
// merchant's endpoint endpointID, makes it a delivery as the endpoint's runner would (the delivery
// engine's sending is not this test's), and returns the delivery's id.
func deliver(t *testing.T, db *store.DB, merchantID, endpointID string) string {
	t.Helper()
	ctx := context.Background()
	if err := db.Write(ctx, func(tx *store.Tx) error {
		return event.Record(ctx, tx, merchantID, event.CustomerCreated, map[string]string{"id": "c1"}, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	webhooktest.Promote(t, db)
	var id int64
	if err := db.Reader().QueryRowContext(ctx, `SELECT MAX(d.id) FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
		WHERE w.endpoint_id = $1`, endpointID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return webhook.DeliveryID(id)
}

// quietEngine is the configuration of a server whose delivery engine looks for due deliveries only
// as it starts, for the tests that write deliveries and attempts of their own, due or not, and read
// them back as they wrote them: an engine sending them meanwhile would change them under the test.
var quietEngine = server.Config{WebhookPoll: time.Hour}

// exec runs a statement of the test's own, as the delivery engine would write it.
func exec(t *testing.T, db *store.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// rowID is the row id of a delivery id.
func rowID(t *testing.T, id string) int64 {
	n, err := strconv.ParseInt(strings.TrimPrefix(id, "whd_"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ids(r servertest.Response) []string {
	var out []string
	for _, d := range r.Body["data"].([]any) {
		out = append(out, d.(map[string]any)["id"].(string))
	}
	return out
}

// The delivery log shows an attempt's error as one of its phrases, whatever the column holds: an
// attempt recorded when the engine kept the whole error (the address refused, the resolver asked)
// reads as the phrase it comes to, in the API and in the endpoint's summary, and names no address.
func TestDeliveryLogShowsPhrasesOnly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, quietEngine)
		a := newAccount(t, srv, checkout.WebhooksRead|checkout.WebhooksWrite)
		id := a.create(t, "https://shop.example/hooks").Str("id")
		// Leased to a node of the test's, the endpoint is left alone by the server's own deliverer:
		// the attempts are those written here.
		exec(t, db, `UPDATE webhook_endpoints SET lease_owner = 'test', lease_until = $2 WHERE endpoint_id = $1`, id,
			time.Now().Add(time.Hour).UnixMilli())
		stored := []struct{ text, shown string }{
			{"address 10.0.0.1 is not public", "target not allowed"},
			{"dial tcp: lookup localhost. on 10.255.255.53:53: no such host", "could not connect"},
			{"dial tcp 192.168.1.20:443: connect: connection refused", "could not connect"},
			{"no answer within 15 s", "timed out"},
			{"tls: failed to verify certificate: x509: certificate is valid for 10.0.0.7, not shop.example", "TLS handshake failed"},
			{"remote error: tls: handshake failure", "TLS handshake failed"},
			{"EOF", "no valid answer"},
			{"target not allowed", "target not allowed"},
		}
		d := deliver(t, db, a.id, id)
		for i, s := range stored {
			exec(t, db, `INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, response, error, created_at) VALUES ($1, 0, 1, '', $2, $3)`,
				rowID(t, d), s.text, 1700000000000+int64(i))
		}
		exec(t, db, `UPDATE webhook_deliveries SET attempts = $2 WHERE id = $1`, rowID(t, d), len(stored))
		l := a.ok(t, "GET", "/v1/webhook-endpoints/"+id+"/deliveries", nil)
		at := l.Body["data"].([]any)[0].(map[string]any)["attempts"].([]any)
		if len(at) != len(stored) {
			t.Fatalf("%d attempts, want %d: %s", len(at), len(stored), l.Raw)
		}
		for i, s := range stored {
			if got := at[i].(map[string]any)["error"]; got != s.shown {
				t.Errorf("stored %q is shown as %q, want %q", s.text, got, s.shown)
			}
		}
		for _, leak := range []string{"10.", "192.168", ":53", ":443", "lookup", "x509"} {
			if strings.Contains(string(l.Raw), leak) {
				t.Errorf("the delivery log shows %q: %s", leak, l.Raw)
			}
		}
		var row int64
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT id FROM webhook_endpoints WHERE endpoint_id = $1`, id).Scan(&row); err != nil {
			t.Fatal(err)
		}
		sum, err := webhook.NewEndpoints(webhook.EndpointsConfig{DB: db}).Summarize(context.Background(), row)
		if err != nil || sum.Last == nil || sum.Last.Error != "target not allowed" {
			t.Errorf("summary's last attempt %+v (%v), want the error %q", sum.Last, err, "target not allowed")
		}
	})
}

// The delivery log (each attempt's time, status, latency, the first 1 KiB of the answer) is readable
// through the API (GET /v1/webhook-endpoints/{id}/deliveries), with a resend action. Newest first,
// with cursors; a resend queues exactly one new delivery of the same event, due now.
func TestDeliveryLogAndResend(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, quietEngine)
		a := newAccount(t, srv, checkout.WebhooksRead|checkout.WebhooksWrite)
		ep := a.create(t, "https://shop.example/hooks").Str("id")
		other := a.create(t, "https://shop.example/other").Str("id")
		d1 := deliver(t, db, a.id, ep)
		d2 := deliver(t, db, a.id, ep)
		// d1 failed once with a 500, then succeeded; d2 found no server and waits for its next try.
		exec(t, db, `UPDATE webhook_deliveries SET status = 'SUCCEEDED', attempts = 2 WHERE id = $1`, rowID(t, d1))
		exec(t, db, `INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, response, error, created_at) VALUES
			($1, 500, 31, 'oops', '', 1700000000000), ($1, 200, 12, 'ok', '', 1700000005000), ($2, 0, 15000, '', 'could not connect', 1700000010000)`,
			rowID(t, d1), rowID(t, d2))
		exec(t, db, `UPDATE webhook_deliveries SET attempts = 1, next_attempt = 1700000015000 WHERE id = $1`, rowID(t, d2))

		path := "/v1/webhook-endpoints/" + ep + "/deliveries"
		l := a.ok(t, "GET", path, nil)
		if got := ids(l); !slices.Equal(got, []string{d2, d1}) || l.Bool("has_more") || l.Str("object") != "list" {
			t.Fatalf("log %v (%s), want [%s %s]", got, l.Raw, d2, d1)
		}
		first := l.Body["data"].([]any)[0].(map[string]any)
		if first["object"] != "webhook_delivery" || first["endpoint"] != ep || !strings.HasPrefix(first["event_id"].(string), "evt_") ||
			first["event_type"] != "customer.created" || first["status"] != "pending" || first["attempt_count"].(interface{ String() string }).String() != "1" ||
			first["next_attempt"].(interface{ String() string }).String() != "1700000015" {
			t.Errorf("pending delivery %v", first)
		}
		at := first["attempts"].([]any)
		if len(at) != 1 || at[0].(map[string]any)["status_code"].(interface{ String() string }).String() != "0" ||
			at[0].(map[string]any)["error"] != "could not connect" || at[0].(map[string]any)["latency_ms"].(interface{ String() string }).String() != "15000" {
			t.Errorf("attempts of the pending delivery %v", at)
		}
		second := l.Body["data"].([]any)[1].(map[string]any)
		at = second["attempts"].([]any)
		if second["status"] != "succeeded" || second["next_attempt"] != nil || len(at) != 2 ||
			at[0].(map[string]any)["response"] != "oops" || at[1].(map[string]any)["response"] != "ok" ||
			at[1].(map[string]any)["created"].(interface{ String() string }).String() != "1700000005" {
			t.Errorf("succeeded delivery %v", second)
		}

		// Paging, as the payment intents' list pages.
		p := a.ok(t, "GET", path+"?limit=1", nil)
		if got := ids(p); !slices.Equal(got, []string{d2}) || !p.Bool("has_more") {
			t.Errorf("limit=1: %v more %v", got, p.Bool("has_more"))
		}
		if got := ids(a.ok(t, "GET", path+"?limit=1&starting_after="+d2, nil)); !slices.Equal(got, []string{d1}) {
			t.Errorf("starting_after: %v", got)
		}
		if got := ids(a.ok(t, "GET", path+"?ending_before="+d1, nil)); !slices.Equal(got, []string{d2}) {
			t.Errorf("ending_before: %v", got)
		}
		wantError(t, a.do(t, "GET", path+"?starting_after=evt_1", nil), 400, "invalid_request", "starting_after")
		wantError(t, a.do(t, "GET", path+"?limit=0", nil), 400, "invalid_request", "limit")
		if got := ids(a.ok(t, "GET", "/v1/webhook-endpoints/"+other+"/deliveries", nil)); len(got) != 2 || slices.Contains(got, d1) {
			t.Errorf("the other endpoint's log %v holds this one's deliveries", got)
		}

		// Resend d1: one new delivery of its event, pending, due now, no attempt yet.
		before := count(t, db, `SELECT COUNT(*) FROM webhook_deliveries`)
		now := time.Now().Unix()
		r := a.ok(t, "POST", path+"/"+d1+"/resend", nil)
		if r.Str("id") == d1 || r.Str("id") == d2 || r.Str("status") != "pending" || r.Num("attempt_count") != "0" ||
			r.Str("event_id") != second["event_id"] || r.Str("endpoint") != ep || len(r.Body["attempts"].([]any)) != 0 {
			t.Fatalf("resend: %s", r.Raw)
		}
		if next, _ := strconv.ParseInt(r.Num("next_attempt"), 10, 64); next < now-1 || next > now+5 {
			t.Errorf("the resent delivery is due at %d, want now (%d)", next, now)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM webhook_deliveries`); n != before+1 {
			t.Fatalf("%d deliveries after a resend, want %d", n, before+1)
		}
		if got := ids(a.ok(t, "GET", path, nil)); !slices.Equal(got, []string{r.Str("id"), d2, d1}) {
			t.Errorf("log after the resend %v", got)
		}
		if count(t, db, `SELECT COUNT(*) FROM webhook_deliveries WHERE id = $1 AND status = 'SUCCEEDED' AND attempts = 2`, rowID(t, d1)) != 1 {
			t.Error("the resent delivery changed")
		}

		// A delivery that is not this endpoint's is not found; a disabled endpoint is sent nothing.
		for _, d := range []string{deliver(t, db, a.id, other), "whd_999999", "whd_01", "nonsense"} {
			wantError(t, a.do(t, "POST", path+"/"+d+"/resend", nil), 404, "not_found", "")
		}
		a.ok(t, "PATCH", "/v1/webhook-endpoints/"+ep, map[string]any{"disabled": true})
		n := count(t, db, `SELECT COUNT(*) FROM webhook_deliveries`)
		wantError(t, a.do(t, "POST", path+"/"+d2+"/resend", nil), 409, "endpoint_disabled", "")
		wantError(t, a.do(t, "POST", path+"/"+d2+"/resend", map[string]any{"at": 1}), 400, "unknown_field", "at")
		if count(t, db, `SELECT COUNT(*) FROM webhook_deliveries`) != n {
			t.Error("a refused resend queued a delivery")
		}
	})
}

// "Re-enabling an endpoint clears disabled_reason and failing_since": an endpoint Kassa disabled
// (an answer 410, five days of failures) starts afresh.
func TestReenableClearsWhyKassaDisabled(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{})
		a := newAccount(t, srv, checkout.WebhooksRead|checkout.WebhooksWrite)
		id := a.create(t, "https://shop.example/").Str("id")
		exec(t, db, `UPDATE webhook_endpoints SET disabled = TRUE, disabled_reason = 'The endpoint answered 410 Gone.', failing_since = 1700000000000
			WHERE endpoint_id = $1`, id)
		if g := a.ok(t, "GET", "/v1/webhook-endpoints/"+id, nil); !g.Bool("disabled") || g.Str("disabled_reason") != "The endpoint answered 410 Gone." {
			t.Fatalf("disabled by Kassa: %s", g.Raw)
		}
		// A change that does not enable it keeps why.
		if u := a.ok(t, "PATCH", "/v1/webhook-endpoints/"+id, map[string]any{"description": "x"}); u.Str("disabled_reason") == "" {
			t.Fatalf("a description change cleared the reason: %s", u.Raw)
		}
		u := a.ok(t, "PATCH", "/v1/webhook-endpoints/"+id, map[string]any{"disabled": false})
		if u.Bool("disabled") || u.Str("disabled_reason") != "" {
			t.Fatalf("re-enabled: %s", u.Raw)
		}
		if count(t, db, `SELECT COUNT(*) FROM webhook_endpoints WHERE endpoint_id = $1 AND failing_since IS NULL AND disabled_reason = ''`, id) != 1 {
			t.Error("failing_since or disabled_reason kept after re-enabling")
		}
	})
}

// "Rotating it keeps the old one signing beside the new for 24 hours": SigningSecrets gives [new, old]
// until then, [new] after; a second rotation within the 24 hours keeps only the one it replaces.
func TestRotationKeepsTheOldSecretFor24Hours(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		clk := clock.NewManual(time.UnixMilli(1_800_000_000_000))
		ring, err := envelope.NewKeyring(ctx, db, servertest.NewKEK(t), clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		es := webhook.NewEndpoints(webhook.EndpointsConfig{DB: db, Keyring: ring, Now: clk.Now})
		var m merchant.Merchant
		if err := db.Write(ctx, func(tx *store.Tx) error {
			m, err = merchant.Create(ctx, tx, merchant.New{Name: "Shop", Email: "rotate@example.com"}, clk.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		url, all := "https://shop.example/", []string{"*"}
		e, s1, err := es.Create(ctx, m.ID, webhook.EndpointBody{URL: &url, EnabledEvents: &all}, webhook.Actor{})
		if err != nil {
			t.Fatal(err)
		}
		want := func(at time.Time, secrets ...string) {
			t.Helper()
			got, err := es.SigningSecrets(ctx, e.ID, at)
			if err != nil || !slices.Equal(got, secrets) {
				t.Fatalf("signing secrets at %s: %d secrets (%v), want %d", at.UTC(), len(got), err, len(secrets))
			}
		}
		want(clk.Now(), s1)
		clk.Advance(time.Hour)
		rotated := clk.Now()
		s2, err := es.RotateSecret(ctx, m.ID, e.EndpointID, webhook.Actor{})
		if err != nil || s2 == s1 || !strings.HasPrefix(s2, "whsec_") {
			t.Fatalf("rotate: %v", err)
		}
		want(rotated, s2, s1)
		want(rotated.Add(webhook.RotationOverlap-time.Millisecond), s2, s1)
		want(rotated.Add(webhook.RotationOverlap), s2)
		if cur, err := es.Secret(ctx, m.ID, e.EndpointID); err != nil || cur != s2 {
			t.Fatalf("Secret after the rotation is not the new one (%v)", err)
		}
		clk.Advance(time.Hour)
		s3, err := es.RotateSecret(ctx, m.ID, e.EndpointID, webhook.Actor{})
		if err != nil {
			t.Fatal(err)
		}
		want(clk.Now(), s3, s2)
		want(clk.Now().Add(webhook.RotationOverlap), s3)
		if _, err := es.RotateSecret(ctx, "0000000000", e.EndpointID, webhook.Actor{}); err == nil {
			t.Error("another merchant rotated the secret")
		}
	})
}

// The secret is "stored sealed under the key-encryption key": after creating an endpoint and rotating
// its secret through the API, with Idempotency-Keys (whose answers are kept), the raw database holds
// neither secret nor the HMAC key of either, in any encoding.
func TestSecretsAreSealedAtRest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, server.Config{})
		a := newAccount(t, srv, checkout.WebhooksRead|checkout.WebhooksWrite)
		c := a.ok(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": "https://sealed.example/", "enabled_events": []string{"*"}},
			"Idempotency-Key", "create-1")
		id, s1 := c.Str("id"), c.Str("secret")
		s2 := a.ok(t, "POST", "/v1/webhook-endpoints/"+id+"/secret/rotate", nil, "Idempotency-Key", "rotate-1").Str("secret")
		if s2 == "" || s2 == s1 || a.ok(t, "GET", "/v1/webhook-endpoints/"+id+"/secret", nil).Str("secret") != s2 {
			t.Fatal("the rotation's secret is not the endpoint's secret")
		}
		// The idempotent replay answers the same secret, from the sealed record.
		if again := a.ok(t, "POST", "/v1/webhook-endpoints/"+id+"/secret/rotate", nil, "Idempotency-Key", "rotate-1").Str("secret"); again != s2 {
			t.Error("the replay of the rotation answers another secret")
		}
		raw := storetest.RawData(t, db)
		if !strings.Contains(raw, "https://sealed.example/") || !strings.Contains(raw, "rotate-1") {
			t.Fatal("the raw data does not hold the endpoint's URL or an Idempotency-Key: the scan reads nothing")
		}
		secrets := map[string]string{}
		for i, s := range []string{s1, s2} {
			key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
			n := strconv.Itoa(i + 1)
			secrets["secret "+n] = s
			secrets["the base64 of secret "+n] = strings.TrimPrefix(s, "whsec_")
			secrets["the HMAC key of secret "+n] = string(key)
		}
		storetest.NotStored(t, raw, secrets)
	})
}

// Deleting an endpoint deletes its deliveries and their attempts, and no other endpoint's: on
// PostgreSQL by the delete's own statements, a delivery having no foreign key there (migration 00047).
func TestDeletingAnEndpointDeletesItsDeliveries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := servertest.Start(t, db, quietEngine)
		a := newAccount(t, srv, checkout.WebhooksRead|checkout.WebhooksWrite)
		gone, kept := a.create(t, "https://a.example/gone").Str("id"), a.create(t, "https://a.example/kept").Str("id")
		deliver(t, db, a.id, gone) // one event: a delivery to each endpoint
		exec(t, db, `INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, created_at) SELECT id, 500, 10, 0 FROM webhook_deliveries`)
		if err := db.Write(context.Background(), func(tx *store.Tx) error { // another, left queued for each
			return event.Record(context.Background(), tx, a.id, event.CustomerCreated, map[string]string{"id": "c2"}, time.Now())
		}); err != nil {
			t.Fatal(err)
		}
		a.ok(t, "DELETE", "/v1/webhook-endpoints/"+gone, nil)
		for _, table := range []string{"webhook_deliveries", "webhook_attempts", "webhook_queue"} {
			if n := count(t, db, `SELECT COUNT(*) FROM `+table); n != 1 {
				t.Errorf("%s: %d rows after the delete, want the kept endpoint's one", table, n)
			}
		}
		if l := a.ok(t, "GET", "/v1/webhook-endpoints/"+kept+"/deliveries", nil); len(l.Body["data"].([]any)) != 1 {
			t.Errorf("the kept endpoint's deliveries: %s", l.Raw)
		}
	})
}
