package dashboard_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/kassapay/kassa/internal/browsertest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/webhook/webhooktest"
)

// webhooksPath is Settings → Webhooks.
const webhooksPath = "/dashboard/settings/webhooks"

// v1 sends a request of the v1 API with a key of the shop's own account holding every permission.
func (s *shop) v1(t *testing.T, method, path string, body any) servertest.Response {
	t.Helper()
	key := s.srv.NewAPIKey(t, "acct_"+s.merchantID, checkout.AllPermissions)
	return s.srv.Do(t, method, path, body, checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, "acct_"+s.merchantID)
}

// recordEvent records a customer.created event of the merchant, which queues its delivery to each of
// the merchant's endpoints, and makes those deliveries as the endpoints' runners would; the sending
// is not these tests'.
func recordEvent(t *testing.T, db *store.DB, merchantID string) {
	t.Helper()
	ctx := context.Background()
	if err := db.Write(ctx, func(tx *store.Tx) error {
		return event.Record(ctx, tx, merchantID, event.CustomerCreated, map[string]string{"id": "c1"}, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	webhooktest.Promote(t, db)
}

// secretOn is the signing secret a page shows.
func secretOn(t *testing.T, body string) string {
	t.Helper()
	m := regexp.MustCompile(`id="endpoint-secret">(whsec_[^<]+)<`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no secret on the page: %s", body)
	}
	return html.UnescapeString(m[1])
}

// A delivery refused by the server's SSRF guard shows on the endpoint's page as "target not allowed",
// never with the address refused: neither the attempt of the server's own deliverer (the endpoint's
// name resolves to loopback, which a server without --webhooks-allow-private refuses) nor one recorded
// when the delivery engine kept the whole error.
func TestWebhookPageShowsNoAddress(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := newShop(t, db, server.Config{})
		id := s.v1(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": "https://localhost:9/hooks", "enabled_events": []string{"*"}}).Str("id")
		recordEvent(t, db, s.merchantID)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var n int
			if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_attempts`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the server's deliverer made no attempt in 30 s")
			}
		}
		d := s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/deliveries", nil).Body["data"].([]any)[0].(map[string]any)["id"].(string)
		if _, err := db.Exec(ctx, `INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, response, error, created_at)
			VALUES ($1, 0, 1, '', 'address 10.0.0.1 is not public', $2)`, strings.TrimPrefix(d, "whd_"), time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
		b := s.browser(t)
		b.signIn("reporting@maple.example")
		resp, body := b.get(webhooksPath + "/" + id)
		wantStatus(t, "the endpoint's page", resp, body, http.StatusOK)
		// The deliverer's attempt and the one recorded above, at least: on a slow machine its retry
		// can come before the page is read. The leaks below catch an attempt shown otherwise.
		if n := strings.Count(body, "<pre>target not allowed</pre>"); n < 2 {
			t.Errorf("%d attempts shown as refused, want 2 or more: %s", n, body)
		}
		for _, leak := range []string{"127.0.0.1", "::1", "10.0.0.1", "not public", "lookup"} {
			if strings.Contains(body, leak) {
				t.Errorf("the endpoint's page shows %q: %s", leak, body)
			}
		}
	})
}

// Settings → Webhooks without script: an owner makes an endpoint (a refused URL shown beside its
// field), reads its secret once (the API's /secret is the same), edits it, disables and enables it,
// rotates the secret, resends a delivery and deletes the endpoint. Reporting reads the list and the log
// and is refused every change; sales staff may not even read; another merchant's endpoint is not found.
func TestWebhooksPages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		form := func(kv ...string) url.Values {
			v := url.Values{"csrf_token": {csrf}}
			for i := 0; i+1 < len(kv); i += 2 {
				v.Add(kv[i], kv[i+1])
			}
			return v
		}

		resp, body := b.post(webhooksPath+"/new", form("url", "http://shop.example/hooks", "events", "all"))
		wantStatus(t, "a refused URL", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, `id="error-url"`) || !strings.Contains(body, `value="http://shop.example/hooks"`) {
			t.Fatalf("the refused URL is not shown beside its field: %s", body)
		}
		resp, body = b.post(webhooksPath+"/new", form("url", "https://shop.example/hooks", "events", "chosen"))
		wantStatus(t, "no event ticked", resp, body, http.StatusBadRequest)
		if !strings.Contains(body, `id="error-enabled_events"`) {
			t.Fatalf("no event ticked is not shown beside the events: %s", body)
		}
		resp, body = b.post(webhooksPath+"/new", form("url", "https://shop.example/hooks", "description", "Orders", "events", "chosen",
			"event", "customer.created", "event", "transaction.refunded"))
		wantStatus(t, "create", resp, body, http.StatusOK)
		secret := secretOn(t, body)
		id := regexp.MustCompile(`<code>(we_[A-Z2-7]{24})</code>`).FindStringSubmatch(body)[1]
		if r := s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/secret", nil); r.Str("secret") != secret {
			t.Fatal("the page's secret is not the endpoint's")
		}
		if r := s.v1(t, "GET", "/v1/webhook-endpoints/"+id, nil); r.Str("description") != "Orders" ||
			!strings.Contains(string(r.Raw), `"enabled_events":["transaction.refunded","customer.created"]`) {
			t.Fatalf("the endpoint made on the page: %s", r.Raw)
		}
		// The secret is shown only when asked for.
		resp, body = b.get(webhooksPath + "/" + id)
		wantStatus(t, "the endpoint's page", resp, body, http.StatusOK)
		if strings.Contains(body, secret) || strings.Contains(body, "whsec_") {
			t.Fatal("the endpoint's page shows the secret unasked")
		}
		resp, body = b.post(webhooksPath+"/"+id+"/secret", form())
		wantStatus(t, "show the secret", resp, body, http.StatusOK)
		if secretOn(t, body) != secret {
			t.Fatal("Show the secret shows another one")
		}

		resp, body = b.post(webhooksPath+"/"+id, form("url", "https://shop.example/v2", "description", "", "events", "all"))
		wantStatus(t, "edit", resp, body, http.StatusSeeOther)
		if r := s.v1(t, "GET", "/v1/webhook-endpoints/"+id, nil); r.Str("url") != "https://shop.example/v2" || !strings.Contains(string(r.Raw), `"enabled_events":["*"]`) {
			t.Fatalf("edited: %s", r.Raw)
		}
		resp, body = b.post(webhooksPath+"/"+id, form("url", "https://shop.example/v3", "events", "chosen", "event", "order.paid"))
		wantStatus(t, "an unknown event", resp, body, http.StatusBadRequest)
		resp, body = b.post(webhooksPath+"/"+id+"/disable", form())
		wantStatus(t, "disable", resp, body, http.StatusSeeOther)
		_, body = b.get(webhooksPath + "/" + id)
		if !strings.Contains(body, `id="endpoint-status">disabled<`) || !strings.Contains(body, "Enable the endpoint") {
			t.Fatalf("after disable: %s", body)
		}
		resp, body = b.post(webhooksPath+"/"+id+"/enable", form())
		wantStatus(t, "enable", resp, body, http.StatusSeeOther)
		if s.v1(t, "GET", "/v1/webhook-endpoints/"+id, nil).Bool("disabled") {
			t.Fatal("still disabled")
		}

		resp, body = b.post(webhooksPath+"/"+id+"/rotate", form())
		wantStatus(t, "rotate", resp, body, http.StatusOK)
		if rotated := secretOn(t, body); rotated == secret || s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/secret", nil).Str("secret") != rotated {
			t.Fatal("the rotated secret shown is not the endpoint's new one")
		}

		// The log: a delivery with its attempts, resent once.
		recordEvent(t, db, s.merchantID)
		deliveries := s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/deliveries", nil).Body["data"].([]any)
		d := deliveries[0].(map[string]any)["id"].(string)
		if _, err := db.Exec(context.Background(), `INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, response, error, created_at)
			VALUES ($1, 503, 42, 'try later', '', $2)`, strings.TrimPrefix(d, "whd_"), time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(context.Background(), `UPDATE webhook_deliveries SET attempts = 1 WHERE id = $1`, strings.TrimPrefix(d, "whd_")); err != nil {
			t.Fatal(err)
		}
		_, body = b.get(webhooksPath + "/" + id)
		if !strings.Contains(body, "HTTP 503") || !strings.Contains(body, "try later") || !strings.Contains(body, "customer.created") {
			t.Fatalf("the log does not show the attempt: %s", body)
		}
		resp, body = b.post(webhooksPath+"/"+id+"/deliveries/"+d+"/resend", form())
		wantStatus(t, "resend", resp, body, http.StatusSeeOther)
		if n := len(s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/deliveries", nil).Body["data"].([]any)); n != 2 {
			t.Fatalf("%d deliveries after a resend, want 2", n)
		}
		resp, body = b.get(resp.Header.Get("Location"))
		if !strings.Contains(body, "queued for delivery again") {
			t.Fatalf("after the resend: %s", body)
		}
		// The server's own deliverer may have tried the resent delivery by now (shop.example does not
		// resolve here: "no answer"); either attempt is the last one, but "none yet" is wrong.
		_, body = b.get(webhooksPath)
		if !strings.Contains(body, "https://shop.example/v2") ||
			!regexp.MustCompile(`<td data-label="Last delivery">(HTTP 503|no answer[^<]*), 20`).MatchString(body) {
			t.Fatalf("the list does not show the endpoint and its last delivery: %s", body)
		}

		// Reporting reads, and is refused every change; sales may not read; nothing changed.
		rb := s.browser(t)
		rcsrf := rb.signIn("reporting@maple.example")
		for _, p := range []string{webhooksPath, webhooksPath + "/" + id} {
			resp, body := rb.get(p)
			wantStatus(t, "reporting GET "+p, resp, body, http.StatusOK)
			if strings.Contains(body, "Resend") || strings.Contains(body, "Replace the secret") || strings.Contains(body, "New endpoint") {
				t.Fatalf("reporting is offered changes on %s", p)
			}
		}
		forms := []string{webhooksPath + "/new", webhooksPath + "/" + id, webhooksPath + "/" + id + "/enable", webhooksPath + "/" + id + "/disable",
			webhooksPath + "/" + id + "/secret", webhooksPath + "/" + id + "/rotate", webhooksPath + "/" + id + "/delete",
			webhooksPath + "/" + id + "/deliveries/" + d + "/resend", webhooksPath + "/" + id + "/test"}
		for _, p := range forms {
			resp, body := rb.post(p, url.Values{"csrf_token": {rcsrf}, "url": {"https://evil.example/"}, "events": {"all"}})
			wantStatus(t, "reporting POST "+p, resp, body, http.StatusForbidden)
			if strings.Contains(body, "whsec_") {
				t.Fatalf("reporting's refused POST %s shows a secret", p)
			}
		}
		sb := s.browser(t)
		sb.signIn("sales@maple.example")
		resp, body = sb.get(webhooksPath)
		wantStatus(t, "sales GET", resp, body, http.StatusForbidden)
		if r := s.v1(t, "GET", "/v1/webhook-endpoints", nil); len(r.Body["data"].([]any)) != 1 ||
			len(s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/deliveries", nil).Body["data"].([]any)) != 2 ||
			r.Body["data"].([]any)[0].(map[string]any)["url"] != "https://shop.example/v2" {
			t.Fatalf("refused POSTs changed the endpoints: %s", r.Raw)
		}

		// Another merchant's endpoint is not found, to every action.
		other := s.srv.NewMerchant(t)
		key := s.srv.NewAPIKey(t, "acct_"+other.ID, checkout.AllPermissions)
		oid := s.srv.Do(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": "https://other.example/", "enabled_events": []string{"*"}},
			checkout.HeaderAPIKey, key.Key, checkout.HeaderAccount, "acct_"+other.ID).Str("id")
		resp, body = b.get(webhooksPath + "/" + oid)
		wantStatus(t, "another merchant's endpoint", resp, body, http.StatusNotFound)
		for _, p := range []string{"/secret", "/rotate", "/delete", "/disable", "/test", ""} {
			resp, body = b.post(webhooksPath+"/"+oid+p, form("url", "https://evil.example/", "events", "all"))
			wantStatus(t, "POST another merchant's "+p, resp, body, http.StatusNotFound)
			if strings.Contains(body, "whsec_") || strings.Contains(body, "other.example") {
				t.Fatalf("POST %s tells of the other merchant's endpoint", p)
			}
		}

		resp, body = b.post(webhooksPath+"/"+id+"/delete", form())
		wantStatus(t, "delete", resp, body, http.StatusSeeOther)
		if r := s.v1(t, "GET", "/v1/webhook-endpoints/"+id, nil); r.Status != http.StatusNotFound {
			t.Fatalf("deleted endpoint: %d", r.Status)
		}
		_, body = b.get(resp.Header.Get("Location"))
		if !strings.Contains(body, "is deleted") || !strings.Contains(body, `id="webhooks-empty"`) {
			t.Fatalf("after the delete: %s", body)
		}
	})
}

// In Chromium: an owner makes an endpoint through the form (its secret copied with the page's
// button), edits it, resends a delivery with the attempts opened (each with its request and answer),
// sends a test event, and deletes it behind its
// confirmation; each page, and the form with a refused URL, passes axe-core in light and dark.
func TestWebhooksInBrowser(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{})
	ctx := browsertest.New(t)
	signInInBrowser(t, ctx, s.srv.URL, "owner@maple.example", pw, "nav")
	browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+webhooksPath), chromedp.WaitVisible(chromedp.CSS("#webhooks-empty")))
	browsertest.CheckAccessibilityEverywhere(t, ctx, "webhooks, none yet")
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Click(chromedp.CSS(`a[href="`+webhooksPath+`/new"]`)),
		chromedp.WaitVisible(chromedp.CSS("#endpoint-url")),
	)
	browsertest.CheckAccessibilityEverywhere(t, ctx, "new webhook endpoint")
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#endpoint-url"), "https://user:pw@shop.example/hooks"),
		chromedp.Click(chromedp.CSS(`form[action="`+webhooksPath+`/new"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#error-url")),
	)
	browsertest.CheckAccessibilityEverywhere(t, ctx, "new webhook endpoint, a refused URL")
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.SetValue(chromedp.CSS("#endpoint-url"), "https://shop.example/hooks"),
		chromedp.SendKeys(chromedp.CSS("#endpoint-description"), "Orders"),
		chromedp.Click(chromedp.CSS("#events-chosen")),
		chromedp.Click(chromedp.CSS(`[id="event-transaction.approved"]`)),
		chromedp.Click(chromedp.CSS(`form[action="`+webhooksPath+`/new"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#endpoint-secret")),
	)
	secret := browsertest.Eval[string](t, ctx, `document.getElementById('endpoint-secret').textContent`)
	id := browsertest.Eval[string](t, ctx, `document.querySelector('#endpoint code').textContent`)
	if !strings.HasPrefix(secret, "whsec_") || s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/secret", nil).Str("secret") != secret {
		t.Fatalf("the secret on the page %q is not the endpoint's", secret)
	}
	if !browsertest.Eval[bool](t, ctx, `!document.querySelector('button[data-copy="endpoint-secret"]').hidden`) {
		t.Error("the copy button is hidden")
	}
	browsertest.CheckAccessibilityEverywhere(t, ctx, "a webhook endpoint with its secret")

	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Navigate(s.srv.URL+webhooksPath+"/"+id), chromedp.WaitVisible(chromedp.CSS("#endpoint-url")),
		chromedp.SetValue(chromedp.CSS("#endpoint-url"), "https://shop.example/v2"),
		chromedp.Click(chromedp.CSS("#events-all")),
		chromedp.Click(chromedp.CSS(`form[action="`+webhooksPath+`/`+id+`"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("[role=status]")),
	)
	if r := s.v1(t, "GET", "/v1/webhook-endpoints/"+id, nil); r.Str("url") != "https://shop.example/v2" || r.Str("description") != "Orders" ||
		!strings.Contains(string(r.Raw), `"enabled_events":["*"]`) {
		t.Fatalf("edited in the browser: %s", r.Raw)
	}

	recordEvent(t, s.srv.DB, s.merchantID)
	d := s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/deliveries", nil).Body["data"].([]any)[0].(map[string]any)["id"].(string)
	if _, err := s.srv.DB.Exec(context.Background(), `INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, response, error, created_at)
		VALUES ($1, 0, 15000, '', 'timed out', $2)`, strings.TrimPrefix(d, "whd_"), time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+webhooksPath+"/"+id), chromedp.WaitVisible(chromedp.CSS("#deliveries")),
		chromedp.Click(chromedp.CSS("#deliveries details summary")))
	if !strings.Contains(browsertest.Eval[string](t, ctx, `document.querySelector('#deliveries details').textContent`), "timed out") {
		t.Error("the opened attempts do not show the error")
	}
	browsertest.CheckAccessibilityEverywhere(t, ctx, "a webhook endpoint's delivery log, an attempt opened")
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Click(chromedp.CSS(`#deliveries button[aria-label^="Resend"]`)),
		chromedp.WaitVisible(chromedp.CSS("[role=status]")),
	)
	if n := len(s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/deliveries", nil).Body["data"].([]any)); n != 2 {
		t.Fatalf("%d deliveries after Resend, want 2", n)
	}
	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Click(chromedp.CSS("#send-test")),
		chromedp.WaitVisible(chromedp.CSS(`#deliveries button[aria-label^="Resend webhook_endpoint.ping"]`)),
	)
	if r := s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/deliveries", nil); len(r.Body["data"].([]any)) != 3 ||
		r.Body["data"].([]any)[0].(map[string]any)["event_type"] != "webhook_endpoint.ping" {
		t.Fatalf("after Send test event: %s", r.Raw)
	}
	browsertest.CheckAccessibilityEverywhere(t, ctx, "a webhook endpoint after a test event")
	browsertest.Step(t, ctx, 30*time.Second, chromedp.Navigate(s.srv.URL+webhooksPath), chromedp.WaitVisible(chromedp.CSS("#webhooks")))
	browsertest.CheckAccessibilityEverywhere(t, ctx, "webhooks")

	browsertest.Step(t, ctx, 30*time.Second,
		chromedp.Navigate(s.srv.URL+webhooksPath+"/"+id), chromedp.WaitVisible(chromedp.CSS("details.confirm")),
		chromedp.Click(chromedp.CSS("details.confirm summary")),
		chromedp.Click(chromedp.CSS("#delete")),
		chromedp.WaitVisible(chromedp.CSS("#webhooks-empty")),
	)
	if r := s.v1(t, "GET", "/v1/webhook-endpoints/"+id, nil); r.Status != http.StatusNotFound {
		t.Fatalf("deleted in the browser: %d", r.Status)
	}
}

// localReceiver is a merchant's server on the developer's machine (plain HTTP on 127.0.0.1, reached
// with --webhooks-allow-private): it keeps each request and answers 200 with a header and a body of
// its own.
type localReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*http.Request
	raw []string
}

func newLocalReceiver(t *testing.T) *localReceiver {
	rc := &localReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got, rc.raw = append(rc.got, r), append(rc.raw, string(body))
		rc.mu.Unlock()
		w.Header().Set("X-Receiver", "local-dev")
		io.WriteString(w, "pong from the shop")
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *localReceiver) requests() ([]*http.Request, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got), slices.Clone(rc.raw)
}

// waitForPage gets path until its body contains want.
func waitForPage(t *testing.T, b *browser, path, want string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body := b.get(path)
		if strings.Contains(body, want) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q: %s", path, want, body)
		}
	}
}

// "Send test event" (a manager's POST with the page's CSRF token) queues a webhook_endpoint.ping for
// that endpoint alone — another endpoint subscribed to every event gets nothing — signed under the
// endpoint's secret; its attempt shows the request (the headers with the signature sent, the body)
// and the answer (status, headers, body). An endpoint made in the dashboard with an http:// URL on
// 127.0.0.1 is accepted since the server runs with --webhooks-allow-private. A failed attempt shows
// only the log's phrase; a disabled endpoint, a missing token and the reporting role are refused.
func TestWebhookSendTestEvent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{WebhooksAllowPrivate: true, WebhookPoll: 20 * time.Millisecond})
		rc, other := newLocalReceiver(t), newLocalReceiver(t)
		b := s.browser(t)
		csrf := b.signIn("owner@maple.example")
		resp, body := b.post(webhooksPath+"/new", url.Values{"csrf_token": {csrf}, "url": {rc.srv.URL + "/hooks"}, "events": {"chosen"},
			"event": {"invoice.paid"}})
		wantStatus(t, "an http:// endpoint on 127.0.0.1", resp, body, http.StatusOK)
		secret := secretOn(t, body)
		id := regexp.MustCompile(`<code>(we_[^<]+)</code>`).FindStringSubmatch(body)[1]
		s.v1(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": other.srv.URL + "/all", "enabled_events": []string{"*"}})

		resp, body = b.post(webhooksPath+"/"+id+"/test", url.Values{})
		wantStatus(t, "without the CSRF token", resp, body, http.StatusForbidden)
		rb := s.browser(t)
		resp, body = rb.post(webhooksPath+"/"+id+"/test", url.Values{"csrf_token": {rb.signIn("reporting@maple.example")}})
		wantStatus(t, "reporting", resp, body, http.StatusForbidden)
		if n := len(s.v1(t, "GET", "/v1/webhook-endpoints/"+id+"/deliveries", nil).Body["data"].([]any)); n != 0 {
			t.Fatalf("%d deliveries after refused test events", n)
		}

		resp, body = b.post(webhooksPath+"/"+id+"/test", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "send a test event", resp, body, http.StatusSeeOther)
		page := resp.Header.Get("Location")
		body = waitForPage(t, b, page, "HTTP 200")
		if !strings.Contains(body, "A test event is queued for this endpoint, as whd_") {
			t.Errorf("no notice of the test event: %s", body)
		}
		got, raw := rc.requests()
		if len(got) != 1 {
			t.Fatalf("the endpoint got %d requests, want 1", len(got))
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify([]byte(raw[0]), got[0].Header); err != nil || !strings.HasPrefix(raw[0], `{"type":"webhook_endpoint.ping",`) ||
			!strings.Contains(raw[0], `"id":"`+id+`"`) {
			t.Fatalf("the test event %s does not verify under the endpoint's secret (%v)", raw[0], err)
		}
		for _, want := range []string{
			"<code>webhook_endpoint.ping</code>",
			"POST " + rc.srv.URL + "/hooks\n",
			"webhook-id: " + got[0].Header.Get("webhook-id") + "\n",
			"webhook-timestamp: " + got[0].Header.Get("webhook-timestamp") + "\n",
			"webhook-signature: " + got[0].Header.Get("webhook-signature") + "\n",
			"Content-Type: application/json\n",
			raw[0],
			"HTTP 200\n", "X-Receiver: local-dev\n", "pong from the shop",
		} {
			if !strings.Contains(html.UnescapeString(body), want) {
				t.Errorf("the attempt does not show %q: %s", want, body)
			}
		}
		if o, _ := other.requests(); len(o) != 0 {
			t.Errorf("another endpoint of the merchant got %d requests of the test event", len(o))
		}

		// An attempt without an answer shows the log's phrase and no answer, nothing of the network.
		rc.srv.Close()
		resp, body = b.post(webhooksPath+"/"+id+"/test", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "a second test event", resp, body, http.StatusSeeOther)
		body = waitForPage(t, b, page, "<pre>could not connect</pre>")
		if !strings.Contains(body, "No answer.") || strings.Contains(body, "connection refused") || strings.Contains(body, "dial") {
			t.Errorf("the failed attempt shows more than its phrase: %s", body)
		}

		resp, body = b.post(webhooksPath+"/"+id+"/disable", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "disable", resp, body, http.StatusSeeOther)
		resp, body = b.post(webhooksPath+"/"+id+"/test", url.Values{"csrf_token": {csrf}})
		wantStatus(t, "a test event to a disabled endpoint", resp, body, http.StatusConflict)
		if !strings.Contains(body, "enable it, then send a test event") {
			t.Errorf("the refusal does not say to enable the endpoint: %s", body)
		}
	})
}
