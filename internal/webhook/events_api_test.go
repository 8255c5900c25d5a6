package webhook_test

import (
	"context"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/hostedpage"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// shop is a merchant of a test server, with a v1 API key of its account holding perms.
type shop struct {
	srv *servertest.Server
	m   *servertest.Merchant
	key []string // the v1 headers
}

func newShop(t *testing.T, srv *servertest.Server, perms checkout.Permissions) *shop {
	t.Helper()
	m := srv.NewMerchant(t)
	return &shop{srv: srv, m: m, key: keyHeaders(t, srv, m.ID, perms)}
}

func keyHeaders(t *testing.T, srv *servertest.Server, merchantID string, perms checkout.Permissions) []string {
	t.Helper()
	account := "acct_" + merchantID
	return []string{checkout.HeaderAPIKey, srv.NewAPIKey(t, account, perms).Key, checkout.HeaderAccount, account}
}

// v1 sends a v1 request with the shop's key and fails t unless the answer is 200.
func (s *shop) v1(t *testing.T, method, path string, body any) servertest.Response {
	t.Helper()
	r := s.srv.Do(t, method, path, body, s.key...)
	if r.Status != 200 {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
	}
	return r
}

// gateway sends a gateway API request with the merchant's bearer token and fails t unless it is 200.
func (s *shop) gateway(t *testing.T, path string, body any) servertest.Response {
	t.Helper()
	r := s.m.Do(t, "POST", "/transaction-service/"+path, body)
	if r.Status != 200 {
		t.Fatalf("POST %s: %d %s", path, r.Status, r.Raw)
	}
	return r
}

// events lists the shop's events with query, oldest first (the API's order reversed).
func (s *shop) events(t *testing.T, query string) []map[string]any {
	t.Helper()
	data := s.v1(t, "GET", "/v1/events?"+query, nil).Body["data"].([]any)
	out := make([]map[string]any, len(data))
	for i, e := range data {
		out[len(data)-1-i] = e.(map[string]any)
	}
	return out
}

// want is an event expected: its type and its data, the object as the API answered at that moment.
type want struct {
	typ  string
	data map[string]any
}

// wantEvents fails t unless got are the events of wants, in order, each with its id, object and time.
func wantEvents(t *testing.T, got []map[string]any, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		types := make([]any, len(got))
		for i, e := range got {
			types[i] = e["type"]
		}
		t.Fatalf("%d events %v; want %d", len(got), types, len(wants))
	}
	for i, w := range wants {
		e := got[i]
		if e["type"] != w.typ || e["object"] != "event" || !strings.HasPrefix(e["id"].(string), "evt_") || e["created"] == nil {
			t.Fatalf("event %d: %v; want type %s", i, e, w.typ)
		}
		if !reflect.DeepEqual(e["data"], w.data) {
			t.Fatalf("event %d (%s): data\n%v\nwant what the API answered\n%v", i, w.typ, e["data"], w.data)
		}
	}
}

// sale is the body of a gateway API sale or authorization of 10.00 CAD with card number, and fields.
func sale(number string, fields ...string) map[string]any {
	b := map[string]any{"amount": "10.00", "currency": "CAD", "card_number": number, "card_expiry_month": "12", "card_expiry_year": "40",
		"cvv2": "123"}
	for i := 0; i+1 < len(fields); i += 2 {
		b[fields[i]] = fields[i+1]
	}
	return b
}

// Every transaction event, driven through the gateway API: each is the transaction as the API
// answered it. A follow-up that the parent's state refuses records none.
func TestTransactionEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		srv := servertest.Start(t, db, server.Config{Now: clk.Now, Simulator: simulator.Config{HoldDays: 1}})
		s := newShop(t, srv, checkout.EventsRead)
		var wants []want
		step := func(typ string, r servertest.Response) servertest.Response {
			wants = append(wants, want{typ, r.Body})
			return r
		}
		step("transaction.approved", s.gateway(t, "sale", sale(cardtest.Visa)))
		step("transaction.declined", s.gateway(t, "sale", sale(cardtest.Declined)))
		auth := step("transaction.approved", s.gateway(t, "authorize", sale(cardtest.Mastercard, "amount", "30.00")))
		capture := step("transaction.captured", s.gateway(t, "capture/"+auth.Num("id"), map[string]any{"amount": "25.00"}))
		step("transaction.refunded", s.gateway(t, "refund/"+capture.Num("id"), map[string]any{"amount": "5.00"}))
		if r := s.m.Do(t, "POST", "/transaction-service/refund/"+capture.Num("id"), map[string]any{"amount": "20.01"}); r.Status != 409 {
			t.Fatalf("a refund over what remains: %d %s", r.Status, r.Raw)
		}
		held := step("transaction.approved", s.gateway(t, "authorize", sale(cardtest.Visa)))
		step("transaction.voided", s.gateway(t, "void/"+held.Num("id"), nil))
		lapsed := step("transaction.approved", s.gateway(t, "authorize", sale(cardtest.Visa)))
		clk.Advance(25 * time.Hour)
		s.m.NewToken(t)
		step("transaction.declined", s.gateway(t, "capture/"+lapsed.Num("id"), nil)) // the hold lapsed: a declined follow-up

		wantEvents(t, s.events(t, "limit=100"), wants)
	})
}

// Every payment intent event, driven through the v1 API and the hosted page (a 3-D Secure challenge
// included), with the hosted page's session events: each intent event's data is the intent as GET
// answered right after the change.
func TestPaymentIntentAndSessionEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		srv := servertest.Start(t, db, server.Config{Now: clk.Now})
		s := newShop(t, srv, checkout.AllPermissions)
		var wants []want
		intent := func(id string) map[string]any { return s.v1(t, "GET", "/v1/payment-intents/"+id, nil).Body }
		step := func(id string, types ...string) {
			now := intent(id)
			for _, typ := range types {
				wants = append(wants, want{typ, now})
			}
		}
		method := func(number string) string {
			return s.v1(t, "POST", "/v1/payment-methods", map[string]any{"type": "card",
				"card": map[string]any{"number": number, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}).Str("id")
		}
		create := func(body map[string]any) string {
			id := s.v1(t, "POST", "/v1/payment-intents", body).Str("id")
			step(id, "payment_intent.created")
			return id
		}
		act := func(id, action string, body map[string]any, types ...string) {
			s.v1(t, "POST", "/v1/payment-intents/"+id+"/"+action, body)
			step(id, types...)
		}

		paid := create(map[string]any{"amount": 1200, "currency": "cad"})
		act(paid, "confirm", map[string]any{"payment_method_id": method(cardtest.Visa)}, "payment_intent.succeeded")
		manual := create(map[string]any{"amount": 3000, "currency": "cad", "capture_method": "manual"})
		act(manual, "confirm", map[string]any{"payment_method_id": method(cardtest.Visa)}, "payment_intent.amount_capturable_updated")
		act(manual, "capture", map[string]any{"amount_to_capture": 2000}, "payment_intent.succeeded")
		declined := create(map[string]any{"amount": 500, "currency": "cad"})
		act(declined, "confirm", map[string]any{"payment_method_id": method(cardtest.Declined)}, "payment_intent.payment_failed")
		held := create(map[string]any{"amount": 700, "currency": "cad", "capture_method": "manual"})
		act(held, "confirm", map[string]any{"payment_method_id": method(cardtest.Visa)}, "payment_intent.amount_capturable_updated")
		act(held, "cancel", nil, "payment_intent.canceled")
		unpaid := create(map[string]any{"amount": 800, "currency": "cad"})
		act(unpaid, "cancel", map[string]any{"cancellation_reason": "abandoned"}, "payment_intent.canceled")

		// The hosted page: a declined try, then a 3-D Secure card, its challenge passed.
		session := func() (servertest.Response, string) {
			r := s.v1(t, "POST", "/v1/checkout/hosted-payment-page/sessions?expand=payment_intent", map[string]any{"amount": 4500, "currency": "cad"})
			step(r.Body["payment_intent"].(map[string]any)["id"].(string), "payment_intent.created")
			return r, strings.Replace(r.Str("url"), srv.URL, "", 1)
		}
		sessionData := func(r servertest.Response, intentID string) map[string]any {
			d := map[string]any{}
			for k, v := range r.Body {
				d[k] = v
			}
			delete(d, "url") // the page's credential, which is not stored
			d["payment_intent"] = intent(intentID)
			return d
		}
		card := func(number string) map[string]any {
			return map[string]any{"type": "card", "card": map[string]any{"number": number, "exp_month": 12, "exp_year": 2040, "cvc": "123"}}
		}
		r, page := session()
		pi := r.Body["payment_intent"].(map[string]any)["id"].(string)
		if got := srv.Do(t, "POST", page+"/pay", card(cardtest.Declined)); got.Str("outcome") != "failed" {
			t.Fatalf("a declined try on the page: %s", got.Raw)
		}
		step(pi, "payment_intent.payment_failed")
		if got := srv.Do(t, "POST", page+"/pay", card(cardtest.ThreeDSecure)); got.Str("outcome") != "requires_action" {
			t.Fatalf("a 3-D Secure card on the page: %s", got.Raw)
		}
		step(pi, "payment_intent.requires_action")
		if got := srv.Do(t, "POST", page+"/challenge", map[string]any{"result": "complete"}); got.Str("outcome") != "completed" {
			t.Fatalf("the challenge passed: %s", got.Raw)
		}
		step(pi, "payment_intent.succeeded")
		wants = append(wants, want{"hosted_page.session.completed", sessionData(r, pi)})

		// A session left open expires once, when the sweep finds its hour passed.
		r, _ = session()
		left := r.Body["payment_intent"].(map[string]any)["id"].(string)
		clk.Advance(hostedpage.Lifetime + 5*time.Minute)
		for range 2 {
			if err := srv.HostedPages().Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		wants = append(wants, want{"hosted_page.session.expired", sessionData(r, left)})

		wantEvents(t, s.events(t, "limit=100&type=payment_intent.*,hosted_page.*"), wants)
	})
}

// An attempt whose outcome was never recorded has no event; recovery resolves it (declined as
// interrupted: the processor never received it), and its event is recorded once, the transaction as
// the API then shows it, however often recovery runs.
func TestRecoveredAttemptRecordsItsEventOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		p := &processortest.Unreachable{Processor: simulator.New(simulator.Config{})}
		srv := servertest.Start(t, db, server.Config{Processor: p})
		s := newShop(t, srv, checkout.EventsRead)
		p.Down.Store(true)
		if r := s.m.Do(t, "POST", "/transaction-service/sale", sale(cardtest.Visa)); r.Status != 502 {
			t.Fatalf("a sale the processor did not answer: %d %s", r.Status, r.Raw)
		}
		p.Down.Store(false)
		if got := s.events(t, ""); len(got) != 0 {
			t.Fatalf("events before recovery: %v", got)
		}
		for range 2 {
			if _, err := srv.Ledger().Recover(context.Background(), true); err != nil {
				t.Fatal(err)
			}
		}
		got := s.events(t, "")
		if len(got) != 1 {
			t.Fatalf("%d events after recovery, want 1", len(got))
		}
		id := got[0]["data"].(map[string]any)["transaction_id"].(string)
		r := s.m.Do(t, "GET", "/transaction-service/transaction/lookup/"+id, nil)
		if r.Str("decline_code") != processor.CodeProcessingError {
			t.Fatalf("recovered as %s", r.Raw)
		}
		wantEvents(t, got, []want{{"transaction.declined", r.Body}})
	})
}

// GET /v1/events: newest first, cursors as every v1 list, filters by type (one, a list, a prefix) and
// by time; 400 naming a bad parameter, 403 without events:read, and another account's event is 404.
func TestEventsAPI(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Unix(1_800_000_000, 0))
		srv := servertest.Start(t, db, server.Config{Now: clk.Now})
		s := newShop(t, srv, checkout.AllPermissions)
		ids := func(events []map[string]any) []string {
			out := make([]string, len(events))
			for i, e := range events {
				out[i] = e["id"].(string)
			}
			return out
		}
		s.gateway(t, "sale", sale(cardtest.Visa)) // transaction.approved at T
		clk.Advance(10 * time.Second)
		s.v1(t, "POST", "/v1/payment-intents", map[string]any{"amount": 100, "currency": "cad"}) // payment_intent.created at T+10
		clk.Advance(10 * time.Second)
		s.gateway(t, "sale", sale(cardtest.Declined)) // transaction.declined at T+20
		all := s.events(t, "")
		if len(all) != 3 {
			t.Fatalf("%d events, want 3", len(all))
		}

		for _, tc := range []struct {
			query string
			want  []int // indexes into all, oldest first
		}{
			{"type=transaction.approved", []int{0}},
			{"type=transaction.approved,payment_intent.created", []int{0, 1}},
			{"type=transaction.*", []int{0, 2}},
			{"type=payment_intent.*,transaction.declined", []int{1, 2}},
			{"type=customer.created", nil},
			{"created[gte]=1800000010", []int{1, 2}},
			{"created[lte]=1800000010", []int{0, 1}},
			{"created[gte]=1800000001&created[lte]=1800000019", []int{1}},
			{"type=transaction.*&created[gte]=1800000010", []int{2}},
		} {
			var want []string
			for _, i := range tc.want {
				want = append(want, all[i]["id"].(string))
			}
			if got := ids(s.events(t, tc.query)); !slices.Equal(got, want) {
				t.Errorf("%s: %v, want %v", tc.query, got, want)
			}
		}

		// Pages of one, newest first, then back.
		newest, oldest := all[2]["id"].(string), all[0]["id"].(string)
		page := s.v1(t, "GET", "/v1/events?limit=1", nil)
		if d := page.Body["data"].([]any); len(d) != 1 || d[0].(map[string]any)["id"] != newest || page.Body["has_more"] != true ||
			page.Body["object"] != "list" {
			t.Fatalf("first page: %s", page.Raw)
		}
		if got := ids(s.events(t, "limit=2&starting_after="+newest)); !slices.Equal(got, []string{oldest, all[1]["id"].(string)}) {
			t.Fatalf("after the newest: %v", got)
		}
		last := s.v1(t, "GET", "/v1/events?limit=2&starting_after="+all[1]["id"].(string), nil)
		if last.Body["has_more"] != false || len(last.Body["data"].([]any)) != 1 {
			t.Fatalf("last page: %s", last.Raw)
		}
		if got := ids(s.events(t, "limit=1&ending_before="+oldest)); !slices.Equal(got, []string{all[1]["id"].(string)}) {
			t.Fatalf("before the oldest: %v", got)
		}

		// One event.
		one := s.v1(t, "GET", "/v1/events/"+newest, nil)
		if !reflect.DeepEqual(one.Body, all[2]) || one.Body["created"].(interface{ String() string }).String() != "1800000020" {
			t.Fatalf("GET one: %s; want %v", one.Raw, all[2])
		}

		// Bad parameters name themselves.
		for query, field := range map[string]string{
			"type=transaction.approve": "type", "type=transaction": "type", "type=*": "type", "type=transaction.approved,": "type",
			"created[gte]=yesterday": "created[gte]", "created[lte]=-1": "created[lte]", "limit=0": "limit",
			"starting_after=evt_nope": "starting_after", "ending_before=" + url.QueryEscape("x y"): "ending_before",
			"starting_after=" + newest + "&ending_before=" + oldest: "ending_before",
		} {
			r := srv.Do(t, "GET", "/v1/events?"+query, nil, s.key...)
			if r.Status != 400 || r.Str("field") != field {
				t.Errorf("%s: %d %s; want 400 naming %s", query, r.Status, r.Raw, field)
			}
		}

		// Without events:read, 403; another account sees none of these.
		noRead := keyHeaders(t, srv, s.m.ID, checkout.HostedPagePermissions)
		for _, p := range []string{"/v1/events", "/v1/events/" + newest} {
			if r := srv.Do(t, "GET", p, nil, noRead...); r.Status != 403 {
				t.Errorf("GET %s without events:read: %d %s", p, r.Status, r.Raw)
			}
		}
		other := newShop(t, srv, checkout.EventsRead)
		if r := srv.Do(t, "GET", "/v1/events/"+newest, nil, other.key...); r.Status != 404 {
			t.Errorf("another account's event: %d %s", r.Status, r.Raw)
		}
		if got := other.events(t, ""); len(got) != 0 {
			t.Errorf("another account lists %v", ids(got))
		}
		if r := srv.Do(t, "GET", "/v1/events?starting_after="+newest, nil, other.key...); r.Status != 400 {
			t.Errorf("another account's event as a cursor: %d %s", r.Status, r.Raw)
		}
	})
}
