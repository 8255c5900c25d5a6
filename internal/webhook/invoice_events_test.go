package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// hooks is a merchant's server receiving webhooks over plain HTTP (the server runs with
// --webhooks-allow-private): what each of its paths received, verified with the Standard Webhooks
// library under that path's endpoint's secret, by webhook-id.
type hooks struct {
	srv     *httptest.Server
	mu      sync.Mutex
	secrets map[string]string                    // path → the endpoint's secret
	got     map[string]map[string]map[string]any // path → webhook-id → the body
	bad     []string
}

func newHooks(t *testing.T) *hooks {
	h := &hooks{secrets: map[string]string{}, got: map[string]map[string]map[string]any{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(h.secrets[r.URL.Path])
		if err == nil {
			// The test's clock is not the library's: the signature is checked, not the time.
			err = wh.VerifyIgnoringTimestamp(body, r.Header)
		}
		var msg map[string]any
		if err == nil {
			err = json.Unmarshal(body, &msg)
		}
		if err != nil {
			h.bad = append(h.bad, r.URL.Path+": "+err.Error())
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if h.got[r.URL.Path] == nil {
			h.got[r.URL.Path] = map[string]map[string]any{}
		}
		h.got[r.URL.Path][r.Header.Get("webhook-id")] = msg // a delivery sent twice is one
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// received returns what path received, by webhook-id, and the requests that failed verification.
func (h *hooks) received(path string) (map[string]map[string]any, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]map[string]any{}
	for id, msg := range h.got[path] {
		out[id] = msg
	}
	return out, slices.Clone(h.bad)
}

// Every invoice event type is produced by driving the invoice API and the billing engine with an
// injected clock, and reaches the endpoints subscribed to it, signed: one subscribed to "*" and one
// subscribed to the invoice types receive each invoice event once, with the data the events API shows
// (the invoice as the API showed it then); one subscribed to transactions receives none of them.
func TestInvoiceEventsReachEndpoints(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, time.November, 20, 12, 0, 0, 0, time.UTC))
		srv := servertest.Start(t, db, server.Config{Now: clk.Now, NoBillingEngine: true, WebhooksAllowPrivate: true})
		s := newShop(t, srv, checkout.AllPermissions)
		var invoiceTypes []string
		for _, typ := range event.Types {
			if strings.HasPrefix(typ, "invoice.") {
				invoiceTypes = append(invoiceTypes, typ)
			}
		}
		h := newHooks(t)
		for path, enabled := range map[string][]string{"/all": {"*"}, "/invoices": invoiceTypes, "/sales": {event.TransactionApproved}} {
			r := s.v1(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": h.srv.URL + path, "enabled_events": enabled})
			h.mu.Lock()
			h.secrets[path] = r.Str("secret")
			h.mu.Unlock()
		}
		do := func(method, path string, body any) servertest.Response {
			t.Helper()
			s.m.NewToken(t) // the clock may have outrun the last one
			r := s.m.Do(t, method, path, body)
			if r.Status != 200 {
				t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
			}
			return r
		}

		const base = "/invoice-service/invoice"
		customer := do("POST", "/customer-service/customer", map[string]any{"email": "vault@example.com"}).Str("lookup_id")
		card := do("POST", "/customer-service/customer/"+customer+"/card", map[string]any{"card_number": cardtest.Visa,
			"card_expiry_month": "12", "card_expiry_year": "40"}).Body["cards"].([]any)[0].(map[string]any)["lookup_id"].(string)
		items := []map[string]any{{"description": "Retainer", "unit_price": "250.00"}}
		paid := do("POST", base, map[string]any{"customer_lookup_id": customer, "due_date": "2026-12-01", "reminder_days": []int{1},
			"items": items}).Str("lookup_id")
		do("PUT", base+"/"+paid, map[string]any{"notes": "Thank you"})
		do("POST", base+"/"+paid+"/send", map[string]any{})
		clk.Advance(12 * 24 * time.Hour) // Dec 2: overdue, and the reminder of day 1
		if _, err := srv.Billing().RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		do("POST", base+"/"+paid+"/pay", map[string]any{"card_lookup_id": card})
		cancelled := do("POST", base, map[string]any{"customer_email": "b@example.com", "send_email": true, "items": items}).Str("lookup_id")
		do("PUT", base+"/"+cancelled, map[string]any{"status": "CANCELLED"})
		draft := do("POST", base, map[string]any{"items": items}).Str("lookup_id")
		do("DELETE", base+"/"+draft, nil)

		events := map[string]map[string]any{} // every event of the shop, by id
		var invoiceEvents, sales []string
		var produced []string
		for _, e := range s.events(t, "limit=100") {
			id, typ := e["id"].(string), e["type"].(string)
			events[id] = e
			switch {
			case strings.HasPrefix(typ, "invoice."):
				invoiceEvents = append(invoiceEvents, id)
				if !slices.Contains(produced, typ) {
					produced = append(produced, typ)
				}
			case typ == event.TransactionApproved:
				sales = append(sales, id)
			}
		}
		if slices.Sort(produced); !slices.Equal(produced, slices.Sorted(slices.Values(invoiceTypes))) {
			t.Fatalf("invoice event types produced: %v; want every one of %v", produced, invoiceTypes)
		}
		if n := len(s.events(t, "limit=100&type=invoice.*")); n != len(invoiceEvents) {
			t.Fatalf("type=invoice.* lists %d events, want %d", n, len(invoiceEvents))
		}

		for path, want := range map[string][]string{"/all": slices.Collect(maps.Keys(events)), "/invoices": invoiceEvents, "/sales": sales} {
			h.expect(t, path, want, events)
		}
	})
}

// expect waits up to 20 s for the endpoint at path to have received the events want (ids), each
// verified, and fails t unless it received those alone, each as events (by id) shows it.
func (h *hooks) expect(t *testing.T, path string, want []string, events map[string]map[string]any) {
	t.Helper()
	var got map[string]map[string]any
	var bad []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, bad = h.received(path)
		if len(got) >= len(want) || len(bad) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(bad) > 0 {
		t.Fatalf("deliveries that failed verification: %v", bad)
	}
	if len(got) != len(want) {
		t.Fatalf("%s received %d events, want %d", path, len(got), len(want))
	}
	for _, id := range want {
		msg, e := got[id], events[id]
		if msg == nil || msg["type"] != e["type"] || !reflect.DeepEqual(normalize(t, msg["data"]), normalize(t, e["data"])) {
			t.Fatalf("%s: event %s (%v) delivered as %v; the events API shows %v", path, id, e["type"], msg, e["data"])
		}
	}
}

// normalize is v as a JSON decoder without UseNumber reads it, to compare what the receiver decoded
// with what the test's client did.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Changes of an intent committed before the engine reads them — a declined confirmation, then one
// that succeeds — are each an event of their own, with the intent as the API answered after that
// change, not as it stands when read: the events API lists them in the order they were made, and the
// endpoint is sent each, its deliveries made in that order.
func TestIntentChangesReadTogetherKeepTheirSnapshots(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Date(2026, time.November, 20, 12, 0, 0, 0, time.UTC))
		srv := servertest.Start(t, db, server.Config{Now: clk.Now, NoBillingEngine: true, WebhooksAllowPrivate: true})
		s := newShop(t, srv, checkout.AllPermissions)
		h := newHooks(t)
		r := s.v1(t, "POST", "/v1/webhook-endpoints", map[string]any{"url": h.srv.URL + "/all", "enabled_events": []string{"*"}})
		h.mu.Lock()
		h.secrets["/all"] = r.Str("secret")
		h.mu.Unlock()
		// Another node holds the endpoint (its lease runs for an hour), so that the engine reads nothing
		// until every change is committed.
		ctx := context.Background()
		if _, err := db.Exec(ctx, `UPDATE webhook_endpoints SET lease_owner = 'elsewhere', lease_until = $2 WHERE endpoint_id = $1`,
			r.Str("id"), clk.Now().Add(time.Hour).UnixMilli()); err != nil {
			t.Fatal(err)
		}

		var wants []want
		method := func(number string) string {
			return s.v1(t, "POST", "/v1/payment-methods", map[string]any{"type": "card",
				"card": map[string]any{"number": number, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}).Str("id")
		}
		id := s.v1(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1900, "currency": "cad"}).Str("id")
		intent := func(typ string) {
			wants = append(wants, want{typ, s.v1(t, "GET", "/v1/payment-intents/"+id, nil).Body})
		}
		intent(event.PaymentIntentCreated)
		s.v1(t, "POST", "/v1/payment-intents/"+id+"/confirm", map[string]any{"payment_method_id": method(cardtest.Declined)})
		intent(event.PaymentIntentPaymentFailed)
		s.v1(t, "POST", "/v1/payment-intents/"+id+"/confirm", map[string]any{"payment_method_id": method(cardtest.Visa)})
		intent(event.PaymentIntentSucceeded)

		listed := s.events(t, "limit=100&type=payment_intent.*")
		wantEvents(t, listed, wants)
		if n := count(t, db, `SELECT COUNT(*) FROM webhook_deliveries`); n != 0 {
			t.Fatalf("%d deliveries made while the endpoint was held", n)
		}
		if _, err := db.Exec(ctx, `UPDATE webhook_endpoints SET lease_owner = NULL, lease_until = NULL WHERE endpoint_id = $1`, r.Str("id")); err != nil {
			t.Fatal(err)
		}

		events := map[string]map[string]any{}
		var ids []string
		for _, e := range s.events(t, "limit=100") {
			events[e["id"].(string)] = e
			ids = append(ids, e["id"].(string))
		}
		h.expect(t, "/all", ids, events)
		var inOrder []string
		rows, err := db.Reader().QueryContext(ctx, `SELECT change_ref FROM webhook_deliveries WHERE change_ref IS NOT NULL ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		var refs []int64
		for rows.Next() {
			var ref int64
			if err := rows.Scan(&ref); err != nil {
				t.Fatal(err)
			}
			refs = append(refs, ref)
		}
		rows.Close()
		for _, ref := range refs {
			var at int64
			if err := db.Reader().QueryRowContext(ctx, `SELECT created_at FROM payment_intent_changes WHERE id = $1`, ref).Scan(&at); err != nil {
				t.Fatal(err)
			}
			inOrder = append(inOrder, event.DerivedID(event.Intent, ref, time.UnixMilli(at)))
		}
		var want []string
		for _, e := range listed {
			want = append(want, e["id"].(string))
		}
		if !slices.Equal(inOrder, want) {
			t.Errorf("deliveries made of %v; want %v, in the order of the changes", inOrder, want)
		}
	})
}
