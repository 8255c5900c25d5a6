package checkout_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/event/eventtest"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// paid creates an intent of amount and pays it with a Visa: succeeded (automatic) or requires_capture
// (manual).
func (a *account) paid(t *testing.T, amount int64, capture string) servertest.Response {
	t.Helper()
	in := a.intent(t, map[string]any{"amount": amount, "currency": "cad", "capture_method": capture})
	return a.ok(t, "POST", path(in.Str("id"), "confirm"), map[string]any{"payment_method_id": a.method(t, cardtest.Visa)})
}

// refund posts a refund.
func (a *account) refund(t *testing.T, body map[string]any, hdr ...string) servertest.Response {
	t.Helper()
	return a.do(t, "POST", "/v1/refunds", body, hdr...)
}

// A refund returns part or the rest of a succeeded intent: the ledger holds a REFUND of latest_charge,
// the intent shows amount_refunded, and each refund is reported with transaction.refunded and
// payment_intent.refunded. Once all is refunded, another refund is a 409.
func TestRefund(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		in := a.paid(t, 5000, "automatic")
		id := in.Str("id")
		if num(in, "amount_refunded") != 0 || !strings.Contains(string(in.Raw), `"amount_refunded":0`) {
			t.Fatalf("paid %s", in.Raw)
		}
		part := a.refund(t, map[string]any{"payment_intent": id, "amount": 2000, "reason": "requested_by_customer", "metadata": map[string]any{"rma": "77"}})
		if part.Status != 200 || !strings.HasPrefix(part.Str("id"), "re_") || part.Str("object") != "refund" || part.Str("status") != "succeeded" ||
			num(part, "amount") != 2000 || part.Str("currency") != "cad" || part.Str("payment_intent") != id || part.Str("charge") != in.Str("latest_charge") ||
			part.Str("reason") != "requested_by_customer" || part.Body["metadata"].(map[string]any)["rma"] != "77" || len(part.Str("transaction")) != 20 ||
			part.Body["failure_reason"] != nil || num(part, "created") == 0 {
			t.Fatalf("refund %d %s", part.Status, part.Raw)
		}
		if got := a.ok(t, "GET", "/v1/refunds/"+part.Str("id"), nil); string(got.Raw) != string(part.Raw) {
			t.Fatalf("get %s\nwant %s", got.Raw, part.Raw)
		}
		after := status(t, a.ok(t, "GET", path(id), nil), "succeeded")
		if num(after, "amount_refunded") != 2000 || num(after, "amount_received") != 5000 || after.Str("latest_charge") != in.Str("latest_charge") {
			t.Fatalf("intent after a refund %s", after.Raw)
		}
		rest := a.refund(t, map[string]any{"payment_intent": id})
		if rest.Status != 200 || num(rest, "amount") != 3000 || rest.Str("status") != "succeeded" || rest.Body["reason"] != nil {
			t.Fatalf("refund of the rest %d %s", rest.Status, rest.Raw)
		}
		if got := a.ok(t, "GET", path(id), nil); num(got, "amount_refunded") != 5000 {
			t.Fatalf("intent after all was refunded %s", got.Raw)
		}
		wantError(t, a.refund(t, map[string]any{"payment_intent": id, "amount": 1}), 409, "charge_already_refunded", "")

		txs := transactions(t, a)
		for _, r := range []servertest.Response{part, rest} {
			tx := txs[r.Str("transaction")]
			if tx["transaction_type"] != "REFUND" || tx["transaction_result"] != "APPROVED" || tx["original_transaction_id"] != in.Str("latest_charge") {
				t.Fatalf("ledger transaction of %s: %v", r.Str("id"), tx)
			}
		}
		// Of both sources: the ledger's outcomes are the transaction.* events.
		types := map[string]int{}
		for _, e := range (&eventtest.Log{DB: db, MerchantID: a.m.ID}).All(t) {
			types[e.Type]++
		}
		for typ, want := range map[string]int{"transaction.refunded": 2, "payment_intent.refunded": 2} {
			if types[typ] != want {
				t.Fatalf("%d %s events, want %d", types[typ], typ, want)
			}
		}
		var data string
		db.Reader().QueryRowContext(context.Background(), `SELECT data FROM payment_intent_changes WHERE merchant_id = $1 AND type = 'payment_intent.refunded'
			ORDER BY id DESC LIMIT 1`, a.m.ID).Scan(&data)
		if !strings.Contains(data, `"amount_refunded":5000`) || !strings.Contains(data, id) {
			t.Fatalf("payment_intent.refunded data %s", data)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM `+intentRecords+` WHERE resource = $1 AND operation = 'payment_intent.refund' AND amount = 2000
			AND transaction_id = $2`, "payment_intent/"+id, part.Str("transaction")); n != 1 {
			t.Fatalf("%d audit records of the refund", n)
		}
	})
}

// With manual capture, latest_charge becomes the capture once the money is captured, and a refund
// returns what the capture collected, not what was authorized.
func TestRefundOfACapture(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		held := status(t, a.paid(t, 9900, "manual"), "requires_capture")
		id := held.Str("id")
		done := status(t, a.ok(t, "POST", path(id, "capture"), map[string]any{"amount_to_capture": 4000}), "succeeded")
		txs := transactions(t, a)
		capture := txs[done.Str("latest_charge")]
		if capture["transaction_type"] != "CAPTURE" || capture["original_transaction_id"] != held.Str("latest_charge") {
			t.Fatalf("latest_charge after the capture is %v, want the capture of %s", capture, held.Str("latest_charge"))
		}
		r := a.refund(t, map[string]any{"payment_intent": id})
		if r.Status != 200 || num(r, "amount") != 4000 || r.Str("charge") != done.Str("latest_charge") ||
			transactions(t, a)[r.Str("transaction")]["original_transaction_id"] != done.Str("latest_charge") {
			t.Fatalf("refund of the capture %d %s", r.Status, r.Raw)
		}
	})
}

// Refunding an intent that holds an uncaptured authorization, or canceling one whose money was
// captured, is a 409 that names the transaction and the call that works — and that call works.
func TestRefundAndCancelNameWhatWorks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		held := a.paid(t, 3000, "manual")
		id := held.Str("id")
		r := a.refund(t, map[string]any{"payment_intent": id})
		wantError(t, r, 409, "payment_intent_unexpected_state", "")
		for _, want := range []string{held.Str("latest_charge"), "POST /v1/payment-intents/" + id + "/cancel", "POST /v1/payment-intents/" + id + "/capture"} {
			if !strings.Contains(r.Str("message"), want) {
				t.Fatalf("refund of an authorization: %q does not name %q", r.Str("message"), want)
			}
		}
		done := status(t, a.ok(t, "POST", path(id, "capture"), nil), "succeeded")
		c := a.do(t, "POST", path(id, "cancel"), nil)
		wantError(t, c, 409, "payment_intent_unexpected_state", "")
		for _, want := range []string{done.Str("latest_charge"), "POST /v1/refunds", `"payment_intent": "` + id + `"`} {
			if !strings.Contains(c.Str("message"), want) {
				t.Fatalf("cancel of a captured intent: %q does not name %q", c.Str("message"), want)
			}
		}
		if r := a.refund(t, map[string]any{"payment_intent": id}); r.Str("status") != "succeeded" {
			t.Fatalf("the refund the cancel named: %d %s", r.Status, r.Raw)
		}
		unpaid := a.intent(t, map[string]any{"amount": 1000, "currency": "cad"})
		wantError(t, a.refund(t, map[string]any{"payment_intent": unpaid.Str("id")}), 409, "payment_intent_unexpected_state", "")
	})
}

// Every rule of a refund's body is a 400 naming the field; another account's intent and refunds are
// not found.
func TestRefundValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a, b := newAccount(t, srv), newAccount(t, srv)
		id := a.paid(t, 1000, "automatic").Str("id")
		for _, tc := range []struct {
			body        map[string]any
			code, field string
		}{
			{map[string]any{}, "invalid_request", "payment_intent"},
			{map[string]any{"payment_intent": ""}, "invalid_request", "payment_intent"},
			{map[string]any{"payment_intent": 7}, "invalid_type", "payment_intent"},
			{map[string]any{"payment_intent": id, "amount": 0}, "invalid_request", "amount"},
			{map[string]any{"payment_intent": id, "amount": -5}, "invalid_request", "amount"},
			{map[string]any{"payment_intent": id, "amount": 10.5}, "invalid_type", "amount"},
			{map[string]any{"payment_intent": id, "amount": "100"}, "invalid_type", "amount"},
			{map[string]any{"payment_intent": id, "amount": 1001}, "invalid_request", "amount"},
			{map[string]any{"payment_intent": id, "reason": "bored"}, "invalid_request", "reason"},
			{map[string]any{"payment_intent": id, "metadata": map[string]any{strings.Repeat("k", 41): "v"}}, "invalid_request", "metadata"},
			{map[string]any{"payment_intent": id, "charge": "x"}, "unknown_field", "charge"},
		} {
			r := a.refund(t, tc.body)
			if r.Status != 400 || r.Str("field") != tc.field {
				t.Errorf("%v: %d %s; want 400 naming %s", tc.body, r.Status, r.Raw, tc.field)
			}
		}
		mine := a.refund(t, map[string]any{"payment_intent": id, "amount": 100})
		wantError(t, b.refund(t, map[string]any{"payment_intent": id}), 404, "not_found", "")
		wantError(t, b.do(t, "GET", "/v1/refunds/"+mine.Str("id"), nil), 404, "not_found", "")
		wantError(t, b.do(t, "GET", "/v1/refunds?payment_intent="+id, nil), 400, "invalid_request", "payment_intent")
		if l := b.ok(t, "GET", "/v1/refunds", nil); len(l.Body["data"].([]any)) != 0 {
			t.Fatalf("b lists a's refunds: %s", l.Raw)
		}
		wantError(t, a.do(t, "GET", "/v1/refunds/re_nothing", nil), 404, "not_found", "")
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND kind = 'REFUND'`, a.m.ID); n != 1 {
			t.Fatalf("%d refunds in the ledger, want 1", n)
		}
	})
}

// POST /v1/refunds needs refunds:write; reading them needs refunds:read; the payment-intent
// permissions give neither.
func TestRefundPermissions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		id := a.paid(t, 1000, "automatic").Str("id")
		re := a.refund(t, map[string]any{"payment_intent": id, "amount": 100}).Str("id")
		with := func(p checkout.Permissions) []string {
			return []string{checkout.HeaderAPIKey, createKey(t, srv, a.id, p).Key}
		}
		intents := with(checkout.HostedPagePermissions)
		for _, r := range []servertest.Response{
			a.do(t, "POST", "/v1/refunds", map[string]any{"payment_intent": id}, intents...),
			a.do(t, "POST", "/v1/refunds", map[string]any{"payment_intent": id}, with(checkout.RefundsRead)...),
			a.do(t, "GET", "/v1/refunds", nil, intents...),
			a.do(t, "GET", "/v1/refunds/"+re, nil, with(checkout.RefundsWrite)...),
		} {
			if r.Status != 403 || r.Str("error") != "insufficient_permissions" || !strings.Contains(r.Str("message"), "refunds:") {
				t.Errorf("%d %s; want a 403 naming the refunds permission", r.Status, r.Raw)
			}
		}
		a.ok(t, "GET", "/v1/refunds/"+re, nil, with(checkout.RefundsRead)...)
		a.ok(t, "POST", "/v1/refunds", map[string]any{"payment_intent": id, "amount": 100}, with(checkout.RefundsWrite)...)
	})
}

// GET /v1/refunds pages newest first like every v1 list, and filters by payment_intent.
func TestListRefunds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		one, two := a.paid(t, 1000, "automatic").Str("id"), a.paid(t, 1000, "automatic").Str("id")
		var ids []string // newest first
		for i, pi := range []string{one, two, one, two, one} {
			r := a.refund(t, map[string]any{"payment_intent": pi, "amount": 100 + i})
			ids = append([]string{r.Str("id")}, ids...)
		}
		list := func(q string) ([]string, bool) {
			t.Helper()
			r := a.ok(t, "GET", "/v1/refunds"+q, nil)
			var out []string
			for _, d := range r.Body["data"].([]any) {
				out = append(out, d.(map[string]any)["id"].(string))
			}
			return out, r.Bool("has_more")
		}
		same := func(got, want []string) bool { return strings.Join(got, " ") == strings.Join(want, " ") }
		if got, more := list(""); !same(got, ids) || more {
			t.Fatalf("all: %v %v, want %v", got, more, ids)
		}
		if got, more := list("?limit=2"); !same(got, ids[:2]) || !more {
			t.Fatalf("first page: %v %v", got, more)
		}
		if got, more := list("?limit=2&starting_after=" + ids[1]); !same(got, ids[2:4]) || !more {
			t.Fatalf("second page: %v %v", got, more)
		}
		if got, more := list("?limit=2&ending_before=" + ids[4]); !same(got, ids[2:4]) || !more {
			t.Fatalf("page before the last: %v %v", got, more)
		}
		if got, _ := list("?payment_intent=" + one); !same(got, []string{ids[0], ids[2], ids[4]}) {
			t.Fatalf("refunds of %s: %v", one, got)
		}
		if got, more := list("?payment_intent=" + two + "&limit=1"); !same(got, ids[1:2]) || !more {
			t.Fatalf("refunds of %s, one: %v %v", two, got, more)
		}
		wantError(t, a.do(t, "GET", "/v1/refunds?starting_after=re_nope", nil), 400, "invalid_request", "starting_after")
		wantError(t, a.do(t, "GET", "/v1/refunds?payment_intent=pi_nope", nil), 400, "invalid_request", "payment_intent")
		wantError(t, a.do(t, "GET", "/v1/refunds?limit=101", nil), 400, "invalid_request", "limit")
	})
}

// A retry with the same Idempotency-Key replays the refund; and when the HTTP layer no longer holds the
// first answer (a 5xx released it, or its node died), the key still finds the refund it made: no
// second refund.
func TestRefundIdempotency(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		id := a.paid(t, 5000, "automatic").Str("id")
		body := map[string]any{"payment_intent": id, "amount": 1500}
		first := a.refund(t, body, "Idempotency-Key", "rma-1")
		again := a.refund(t, body, "Idempotency-Key", "rma-1")
		if first.Status != 200 || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Raw) != string(first.Raw) {
			t.Fatalf("replay %d %s\nfirst %s", again.Status, again.Raw, first.Raw)
		}
		wantError(t, a.refund(t, map[string]any{"payment_intent": id, "amount": 1501}, "Idempotency-Key", "rma-1"), 422, "idempotency_key_reused", "")
		execSQL(t, db, `DELETE FROM idempotency_keys`)
		late := a.refund(t, body, "Idempotency-Key", "rma-1")
		if late.Status != 200 || late.Str("id") != first.Str("id") || late.Header.Get("Idempotent-Replayed") == "true" {
			t.Fatalf("retry after the record was gone: %d %s", late.Status, late.Raw)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND kind = 'REFUND'`, a.m.ID); n != 1 {
			t.Fatalf("%d refunds in the ledger, want 1", n)
		}
		// Another key is another refund.
		if other := a.refund(t, body, "Idempotency-Key", "rma-2"); other.Status != 200 || other.Str("id") == first.Str("id") {
			t.Fatalf("another key: %d %s", other.Status, other.Raw)
		}
		if got := a.ok(t, "GET", path(id), nil); num(got, "amount_refunded") != 3000 {
			t.Fatalf("after two refunds: %s", got.Raw)
		}
	})
}

// Refunds racing each other — through the v1 API and through the transaction service on the same
// capture — never return more than was captured.
func TestConcurrentRefunds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		in := a.paid(t, 10000, "automatic")
		var v1, gateway atomic.Int32
		servertest.Parallel(12, func(i int) {
			if i%3 == 2 {
				r := a.m.Do(t, "POST", "/transaction-service/refund/"+in.Str("latest_charge"), map[string]any{"amount": "60.00"})
				switch {
				case r.Status == 200 && r.Str("transaction_result") == "APPROVED":
					gateway.Add(1)
				case r.Status != 409:
					t.Errorf("gateway refund: %d %s", r.Status, r.Raw)
				}
				return
			}
			r := a.refund(t, map[string]any{"payment_intent": in.Str("id"), "amount": 6000})
			switch {
			case r.Status == 200 && r.Str("status") == "succeeded":
				v1.Add(1)
			case r.Status != 409 && r.Status != 400:
				t.Errorf("v1 refund: %d %s", r.Status, r.Raw)
			}
		})
		if won := v1.Load() + gateway.Load(); won != 1 {
			t.Fatalf("%d refunds of 60.00 of a 100.00 sale succeeded (v1 %d, gateway %d), want 1", won, v1.Load(), gateway.Load())
		}
		var refunded int64
		db.Reader().QueryRowContext(context.Background(), `SELECT COALESCE(SUM(amount), 0) FROM transactions WHERE merchant_id = $1
			AND kind = 'REFUND' AND status = 'APPROVED'`, a.m.ID).Scan(&refunded)
		if got := a.ok(t, "GET", path(in.Str("id")), nil); refunded != 6000 || num(got, "amount_refunded") != 6000 {
			t.Fatalf("refunded %d in the ledger, intent %s", refunded, got.Raw)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM refunds WHERE status = 'pending'`); n != 0 {
			t.Fatalf("%d refunds left pending", n)
		}
	})
}

// A node that dies during a refund leaves it pending. Once its lease has run out, reading the refund
// (or recovery) settles it from the ledger: a refund the ledger approved is recorded, never made
// again; one the ledger never saw is canceled, and the money stays refundable.
func TestRefundAfterCrash(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		srv := start(t, db, server.Config{Now: clk.Now})
		a := newAccount(t, srv)
		ctx := context.Background()
		exec := func(q string, args ...any) { t.Helper(); execSQL(t, db, q, args...) }
		expired := clk.Now().Add(-time.Second).UnixMilli()
		id := a.paid(t, 5000, "automatic").Str("id")

		// Died after the ledger approved the refund, before the intent and the refund recorded it.
		done := a.refund(t, map[string]any{"payment_intent": id, "amount": 1000})
		exec(`UPDATE payment_intents SET pending_op = 'refund', lease_until = $2 WHERE intent_id = $1`, id, expired)
		exec(`UPDATE refunds SET status = 'pending', transaction_id = NULL WHERE refund_id = $1`, done.Str("id"))
		got := a.ok(t, "GET", "/v1/refunds/"+done.Str("id"), nil)
		if got.Str("status") != "succeeded" || got.Str("transaction") != done.Str("transaction") {
			t.Fatalf("after the crash: %s", got.Raw)
		}

		// Died after claiming, before the ledger saw the attempt: recovery cancels the refund.
		var row, attempts int64
		db.Reader().QueryRowContext(ctx, `SELECT id, attempts FROM payment_intents WHERE intent_id = $1`, id).Scan(&row, &attempts)
		exec(`UPDATE payment_intents SET pending_op = 'refund', attempts = $2, lease_until = $3 WHERE intent_id = $1`, id, attempts+1, expired)
		const lostID = "re_LOSTLOSTLOSTLOSTLOSTLOST"
		exec(`INSERT INTO refunds (refund_id, merchant_id, intent_id, attempt, amount, currency, metadata, status, charge, created_at, updated_at)
			VALUES ($5, $1, $2, $3, 4000, 'CAD', '{}', 'pending', $6, $4, $4)`, a.m.ID, row, attempts+1, expired, lostID, done.Str("charge"))
		if err := srv.Checkout().Recover(ctx); err != nil {
			t.Fatal(err)
		}
		lost := a.ok(t, "GET", "/v1/refunds/"+lostID, nil)
		if lost.Str("status") != "canceled" || lost.Body["transaction"] != nil {
			t.Fatalf("a refund the ledger never saw: %s", lost.Raw)
		}
		rest := a.refund(t, map[string]any{"payment_intent": id})
		if rest.Str("status") != "succeeded" || num(rest, "amount") != 4000 {
			t.Fatalf("the rest after the crash: %d %s", rest.Status, rest.Raw)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND kind = 'REFUND'`, a.m.ID); n != 2 {
			t.Fatalf("%d refunds in the ledger, want 2", n)
		}
	})
}

// A refund whose processor does not answer is a 502 and stays pending, the intent's other operations
// waiting; once the ledger's recovery has resolved it (declined, nothing refunded), the refund is
// failed with the decline code, a retry under its Idempotency-Key finds it, and the money can be
// refunded afresh.
func TestRefundProcessorUnavailable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		proc := &processortest.Unreachable{Processor: simulator.New(simulator.Config{Now: clk.Now})}
		srv := start(t, db, server.Config{Now: clk.Now, Processor: proc, ProcessorTimeout: 10 * time.Second})
		a := newAccount(t, srv)
		id := a.paid(t, 3000, "automatic").Str("id")
		proc.Down.Store(true)
		body := map[string]any{"payment_intent": id, "amount": 1000}
		wantError(t, a.refund(t, body, "Idempotency-Key", "rma-9"), 502, "processor_unavailable", "")
		list := a.ok(t, "GET", "/v1/refunds?payment_intent="+id, nil)
		pending := list.Body["data"].([]any)[0].(map[string]any)
		if len(list.Body["data"].([]any)) != 1 || pending["status"] != "pending" || pending["transaction"] != nil {
			t.Fatalf("after the 502: %s", list.Raw)
		}
		wantError(t, a.refund(t, map[string]any{"payment_intent": id, "amount": 500}), 409, "operation_in_progress", "")
		clk.Advance(20 * time.Second)
		if _, err := srv.Ledger().Recover(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		failed := a.ok(t, "GET", "/v1/refunds/"+pending["id"].(string), nil)
		if failed.Str("status") != "failed" || failed.Str("failure_reason") != "processing_error" || len(failed.Str("transaction")) != 20 {
			t.Fatalf("after the recovery: %s", failed.Raw)
		}
		if again := a.refund(t, body, "Idempotency-Key", "rma-9"); again.Str("id") != failed.Str("id") || again.Str("status") != "failed" {
			t.Fatalf("a retry under the same key: %d %s", again.Status, again.Raw)
		}
		proc.Down.Store(false)
		if r := a.refund(t, map[string]any{"payment_intent": id}); r.Str("status") != "succeeded" || num(r, "amount") != 3000 {
			t.Fatalf("the refund once the processor is back: %d %s", r.Status, r.Raw)
		}
		if got := a.ok(t, "GET", path(id), nil); num(got, "amount_refunded") != 3000 {
			t.Fatalf("intent %s", got.Raw)
		}
	})
}
