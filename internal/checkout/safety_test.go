package checkout_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor/processortest"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Another account's intents and payment methods are not found, whatever the operation.
func TestIsolation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a, b := newAccount(t, srv), newAccount(t, srv)
		in := a.intent(t, map[string]any{"amount": 1000, "currency": "cad", "capture_method": "manual"})
		pmA := a.method(t, cardtest.Visa)
		id := in.Str("id")
		for _, r := range []servertest.Response{
			b.do(t, "GET", path(id), nil),
			b.do(t, "PATCH", path(id), map[string]any{"amount": 1}),
			b.do(t, "POST", path(id, "confirm"), map[string]any{"payment_method_id": b.method(t, cardtest.Visa)}),
			b.do(t, "POST", path(id, "capture"), nil),
			b.do(t, "POST", path(id, "cancel"), nil),
			b.do(t, "GET", "/v1/payment-methods/"+pmA, nil),
		} {
			wantError(t, r, 404, "not_found", "")
		}
		own := b.intent(t, map[string]any{"amount": 1000, "currency": "cad"})
		wantError(t, b.do(t, "POST", path(own.Str("id"), "confirm"), map[string]any{"payment_method_id": pmA}), 404, "not_found", "payment_method")
		wantError(t, b.do(t, "PATCH", path(own.Str("id")), map[string]any{"payment_method": pmA}), 404, "not_found", "payment_method")
		// A's intent is untouched and A's method still usable by A.
		status(t, a.do(t, "POST", path(id, "confirm"), map[string]any{"payment_method_id": pmA}), "requires_capture")
		if r := b.ok(t, "GET", "/v1/payment-intents", nil); len(r.Body["data"].([]any)) != 1 {
			t.Fatalf("b lists %s", r.Raw)
		}
	})
}

// A retry with the same Idempotency-Key replays the first answer of a create, a confirm and a capture,
// and moves no money again; keys are per account, and apart from the gateway API's.
func TestIdempotentRetries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a, b := newAccount(t, srv), newAccount(t, srv)
		body := map[string]any{"amount": 5000, "currency": "cad", "capture_method": "manual"}
		first := a.ok(t, "POST", "/v1/payment-intents", body, "Idempotency-Key", "order-77")
		again := a.ok(t, "POST", "/v1/payment-intents", body, "Idempotency-Key", "order-77")
		if string(again.Raw) != string(first.Raw) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay %s", again.Raw)
		}
		wantError(t, a.do(t, "POST", "/v1/payment-intents", map[string]any{"amount": 5001, "currency": "cad"}, "Idempotency-Key", "order-77"),
			422, "idempotency_key_reused", "")
		if n := count(t, db, `SELECT COUNT(*) FROM payment_intents WHERE merchant_id = $1`, a.m.ID); n != 1 {
			t.Fatalf("%d intents after the retry", n)
		}
		// Another account's key of the same name is its own; so is the gateway API's.
		if other := b.ok(t, "POST", "/v1/payment-intents", body, "Idempotency-Key", "order-77"); other.Str("id") == first.Str("id") {
			t.Fatal("another account replayed a's intent")
		}
		if r := a.m.Do(t, "POST", "/transaction-service/sale", map[string]any{"amount": "1.00", "card_number": cardtest.Visa,
			"card_expiry_month": "12", "card_expiry_year": "40", "cvv2": "123"}, "Idempotency-Key", "order-77"); r.Status != 200 {
			t.Fatalf("the gateway API's key of the same name: %d %s", r.Status, r.Raw)
		}

		id := first.Str("id")
		pm := a.method(t, cardtest.Visa)
		confirm := a.ok(t, "POST", path(id, "confirm"), map[string]any{"payment_method_id": pm}, "Idempotency-Key", "confirm-77")
		replay := a.ok(t, "POST", path(id, "confirm"), map[string]any{"payment_method_id": pm}, "Idempotency-Key", "confirm-77")
		if replay.Header.Get("Idempotent-Replayed") != "true" || string(replay.Raw) != string(confirm.Raw) || confirm.Str("status") != "requires_capture" {
			t.Fatalf("confirm replay %s", replay.Raw)
		}
		capture := a.ok(t, "POST", path(id, "capture"), map[string]any{"amount_to_capture": 4000}, "Idempotency-Key", "capture-77")
		replay = a.ok(t, "POST", path(id, "capture"), map[string]any{"amount_to_capture": 4000}, "Idempotency-Key", "capture-77")
		if replay.Header.Get("Idempotent-Replayed") != "true" || string(replay.Raw) != string(capture.Raw) || num(capture, "amount_received") != 4000 {
			t.Fatalf("capture replay %s", replay.Raw)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND kind = 'AUTHORIZATION'`, a.m.ID); n != 1 {
			t.Fatalf("%d authorizations", n)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND kind = 'CAPTURE'`, a.m.ID); n != 1 {
			t.Fatalf("%d captures", n)
		}
	})
}

// Confirmations racing for one intent charge once; so do captures.
func TestConcurrentOperations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		in := a.intent(t, map[string]any{"amount": 2000, "currency": "cad", "capture_method": "manual"})
		id := in.Str("id")
		pm := a.method(t, cardtest.Visa)
		race := func(action string, body any) (won int, statuses []int) {
			statuses = make([]int, 8)
			var ok atomic.Int32
			servertest.Parallel(8, func(i int) {
				r := a.do(t, "POST", path(id, action), body)
				statuses[i] = r.Status
				if r.Status == 200 {
					ok.Add(1)
				} else if r.Status != 409 {
					t.Errorf("%s: %d %s", action, r.Status, r.Raw)
				}
			})
			return int(ok.Load()), statuses
		}
		if won, st := race("confirm", map[string]any{"payment_method_id": pm}); won != 1 {
			t.Fatalf("%d confirmations succeeded (%v), want 1", won, st)
		}
		if won, st := race("capture", nil); won != 1 {
			t.Fatalf("%d captures succeeded (%v), want 1", won, st)
		}
		for kind, want := range map[string]int{"AUTHORIZATION": 1, "CAPTURE": 1} {
			if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND kind = $2`, a.m.ID, kind); n != want {
				t.Fatalf("%d %s transactions, want %d", n, kind, want)
			}
		}
		status(t, a.ok(t, "GET", path(id), nil), "succeeded")
	})
}

// who is the service's view of an account, for calls from Go (as the hosted page makes them).
func who(t *testing.T, a *account) checkout.Who {
	t.Helper()
	m, err := merchant.Get(context.Background(), a.srv.DB.Reader(), a.m.ID)
	if err != nil {
		t.Fatal(err)
	}
	return checkout.Who{Merchant: m, ClientID: "hpp-test"}
}

// A confirmation from the hosted page is a ledger transaction with source HPP.
func TestHostedPageSource(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		ctx := context.Background()
		w := who(t, a)
		cad, _ := money.Lookup("CAD")
		in, err := srv.Checkout().Create(ctx, w, checkout.IntentParams{Amount: 1234, Currency: cad, CaptureMethod: checkout.CaptureAutomatic})
		if err != nil {
			t.Fatal(err)
		}
		done, err := srv.Checkout().Confirm(ctx, w, in.IntentID, checkout.ConfirmParams{PaymentMethod: a.method(t, cardtest.Visa), CVC: "123",
			Source: payment.SourceHPP})
		if err != nil || done.Status != checkout.StatusSucceeded {
			t.Fatalf("confirm: %+v %v", done, err)
		}
		if tx := transactions(t, a)[done.LatestCharge]; tx["transaction_source"] != "HPP" || tx["transaction_result"] != "APPROVED" {
			t.Fatalf("ledger %v", tx)
		}
	})
}

// A confirmation whose processor does not answer leaves the intent processing; other operations wait;
// once the ledger's recovery has resolved the attempt (nothing charged) and the lease has run out, the
// intent settles back to requires_payment_method and can be paid.
func TestProcessorUnavailable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		proc := &processortest.Unreachable{Processor: simulator.New(simulator.Config{Now: clk.Now})}
		srv := start(t, db, server.Config{Now: clk.Now, Processor: proc, ProcessorTimeout: 10 * time.Second})
		a := newAccount(t, srv)
		in := a.intent(t, map[string]any{"amount": 1000, "currency": "cad"})
		id := in.Str("id")
		proc.Down.Store(true)
		wantError(t, a.do(t, "POST", path(id, "confirm"), map[string]any{"payment_method_id": a.method(t, cardtest.Visa)}), 502, "processor_unavailable", "")
		status(t, a.ok(t, "GET", path(id), nil), "processing")
		wantError(t, a.do(t, "POST", path(id, "confirm"), map[string]any{"payment_method_id": a.method(t, cardtest.Visa)}), 409, "operation_in_progress", "")
		wantError(t, a.do(t, "POST", path(id, "cancel"), nil), 409, "operation_in_progress", "")
		wantError(t, a.do(t, "PATCH", path(id), map[string]any{"amount": 5}), 409, "operation_in_progress", "")
		clk.Advance(20 * time.Second) // the lease has run out, but the attempt is still pending in the ledger
		status(t, a.ok(t, "GET", path(id), nil), "processing")
		wantError(t, a.do(t, "POST", path(id, "confirm"), map[string]any{"payment_method_id": a.method(t, cardtest.Visa)}), 409, "operation_in_progress", "")
		if _, err := srv.Ledger().Recover(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		back := status(t, a.ok(t, "GET", path(id), nil), "requires_payment_method")
		if e, _ := back.Body["last_payment_error"].(map[string]any); e["code"] != "processing_error" || back.Str("latest_charge") == "" {
			t.Fatalf("settled %s", back.Raw)
		}
		proc.Down.Store(false)
		status(t, a.do(t, "POST", path(id, "confirm"), map[string]any{"payment_method_id": a.method(t, cardtest.Visa)}), "succeeded")
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND status = 'APPROVED'`, a.m.ID); n != 1 {
			t.Fatalf("%d approved transactions, want 1", n)
		}
	})
}

// A node that dies during a confirmation leaves it pending. Once its lease has run out, the next
// request settles it from the ledger: an approved charge is recorded, never made again; an attempt
// the ledger never saw is released and the confirmation made afresh — from Go, without the HTTP
// layer's idempotency.
func TestConfirmAfterCrash(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		srv := start(t, db, server.Config{Now: clk.Now})
		a := newAccount(t, srv)
		ctx := context.Background()
		w := who(t, a)
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := db.Raw().ExecContext(ctx, q, args...); err != nil {
				t.Fatal(err)
			}
		}
		expired := clk.Now().Add(-time.Second).UnixMilli()

		// Died after the ledger approved the sale, before the intent recorded it.
		charged := a.intent(t, map[string]any{"amount": 2500, "currency": "cad"}).Str("id")
		status(t, a.do(t, "POST", path(charged, "confirm"), map[string]any{"payment_method_id": a.method(t, cardtest.Visa)}), "succeeded")
		exec(`UPDATE payment_intents SET status = 'processing', pending_op = 'confirm', lease_until = $2, amount_received = 0,
			charge_id = NULL, latest_charge = NULL WHERE intent_id = $1`, charged, expired)
		_, err := srv.Checkout().Confirm(ctx, w, charged, checkout.ConfirmParams{Source: payment.SourceHPP})
		var f *fault.Error
		if !errors.As(err, &f) || f.Status != http.StatusConflict || f.Code != "payment_intent_unexpected_state" {
			t.Fatalf("confirm again after the crash: %v", err)
		}
		got, err := srv.Checkout().Get(ctx, w, charged)
		if err != nil || got.Status != checkout.StatusSucceeded || got.AmountReceived != 2500 || got.LatestCharge == "" || got.PendingOp != "" {
			t.Fatalf("after the crash: %+v %v", got, err)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE idempotency_key LIKE $1`, charged+" %"); n != 1 {
			t.Fatalf("%d charges for the intent, want 1", n)
		}

		// Died after claiming, before the ledger saw the attempt.
		pm := a.method(t, cardtest.Mastercard)
		claimed := a.intent(t, map[string]any{"amount": 3100, "currency": "cad", "payment_method": pm}).Str("id")
		exec(`UPDATE payment_intents SET status = 'processing', pending_op = 'confirm', attempts = 1, lease_until = $2 WHERE intent_id = $1`, claimed, expired)
		exec(`UPDATE payment_methods SET attached_to = $1 WHERE pm_id = $2`, claimed, pm)
		done, err := srv.Checkout().Confirm(ctx, w, claimed, checkout.ConfirmParams{Source: payment.SourceHPP})
		if err != nil || done.Status != checkout.StatusSucceeded || done.Attempts != 2 {
			t.Fatalf("confirm after an attempt the ledger never saw: %+v %v", done, err)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE idempotency_key LIKE $1`, claimed+" %"); n != 1 {
			t.Fatalf("%d charges for the intent, want 1", n)
		}

		// Recovery settles what nobody asks about.
		swept := a.intent(t, map[string]any{"amount": 900, "currency": "cad", "capture_method": "manual"}).Str("id")
		held := status(t, a.do(t, "POST", path(swept, "confirm"), map[string]any{"payment_method_id": a.method(t, cardtest.Visa)}), "requires_capture")
		exec(`UPDATE payment_intents SET status = 'processing', pending_op = 'confirm', lease_until = $2, amount_capturable = 0,
			charge_id = NULL, latest_charge = NULL WHERE intent_id = $1`, swept, expired)
		if err := srv.Checkout().Recover(ctx); err != nil {
			t.Fatal(err)
		}
		var st string
		var capturable int64
		db.Reader().QueryRowContext(ctx, `SELECT status, amount_capturable FROM payment_intents WHERE intent_id = $1`, swept).Scan(&st, &capturable)
		if st != checkout.StatusRequiresCapture || capturable != 900 {
			t.Fatalf("after recovery: %s %d", st, capturable)
		}
		captured := status(t, a.do(t, "POST", path(swept, "capture"), nil), "succeeded")
		if got := a.ok(t, "GET", path(swept), nil); got.Str("latest_charge") != captured.Str("latest_charge") ||
			transactions(t, a)[got.Str("latest_charge")]["original_transaction_id"] != held.Str("latest_charge") {
			t.Fatalf("latest_charge %s, want the capture of %s", got.Str("latest_charge"), held.Str("latest_charge"))
		}
	})
}

// A confirmation, a capture or a cancellation whose node died after settling it and before its answer
// was stored is retried by its client with the same Idempotency-Key once the HTTP layer has let the
// first attempt go; the retry is answered with the intent the operation settled — as the first attempt
// would have been — and nothing runs again. The reliability drill found such retries answered 409
// ("its status is succeeded") or 400 (the payment method already used). Another key is another
// request, and meets the state as it is.
func TestRetryAfterALostAnswerFindsTheSettledIntent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		lost := func() { execSQL(t, db, `DELETE FROM idempotency_keys`) } // the first answer went with its node

		in := a.intent(t, map[string]any{"amount": 4200, "currency": "cad", "capture_method": "manual"})
		id := in.Str("id")
		confirm := map[string]any{"payment_method": a.method(t, cardtest.Visa)}
		held := status(t, a.do(t, "POST", path(id, "confirm"), confirm, "Idempotency-Key", "conf-1"), "requires_capture")
		lost()
		again := a.do(t, "POST", path(id, "confirm"), confirm, "Idempotency-Key", "conf-1")
		if again.Status != 200 || again.Str("status") != "requires_capture" || again.Str("latest_charge") != held.Str("latest_charge") {
			t.Fatalf("the confirmation retried after its answer was lost: %d %s", again.Status, again.Raw)
		}
		wantError(t, a.do(t, "POST", path(id, "confirm"), confirm, "Idempotency-Key", "conf-2"), 409, "payment_intent_unexpected_state", "")

		done := status(t, a.do(t, "POST", path(id, "capture"), map[string]any{"amount_to_capture": 4000}, "Idempotency-Key", "cap-1"), "succeeded")
		lost()
		again = a.do(t, "POST", path(id, "capture"), map[string]any{"amount_to_capture": 4000}, "Idempotency-Key", "cap-1")
		if again.Status != 200 || again.Str("status") != "succeeded" || again.Str("latest_charge") != done.Str("latest_charge") {
			t.Fatalf("the capture retried after its answer was lost: %d %s", again.Status, again.Raw)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND kind IN ('AUTHORIZATION', 'CAPTURE')`, a.m.ID); n != 2 {
			t.Fatalf("%d authorizations and captures in the ledger, want 2", n)
		}

		open := a.intent(t, map[string]any{"amount": 1000, "currency": "cad"}).Str("id")
		status(t, a.do(t, "POST", path(open, "cancel"), nil, "Idempotency-Key", "can-1"), "canceled")
		lost()
		if again := a.do(t, "POST", path(open, "cancel"), nil, "Idempotency-Key", "can-1"); again.Status != 200 || again.Str("status") != "canceled" {
			t.Fatalf("the cancellation retried after its answer was lost: %d %s", again.Status, again.Raw)
		}
	})
}

// A change of an intent whose transaction rolls back — the settling of a confirmation that the
// database refuses after the change is written (here, deleting the number of the payment method it
// used) — leaves no change row, and so no event and no record; settled again once the database
// allows it, the confirmation is one change, with one payment_intent.succeeded.
func TestRolledBackChangeLeavesNoEvent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		srv := start(t, db, server.Config{Now: clk.Now})
		a := newAccount(t, srv)
		ctx := context.Background()
		exec := func(q string) {
			t.Helper()
			if _, err := db.Raw().ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		refuse := []string{`CREATE TRIGGER refuse_consume BEFORE UPDATE OF pan ON payment_methods WHEN NEW.pan IS NULL
			BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`}
		allow := []string{`DROP TRIGGER refuse_consume`}
		if db.Dialect() == store.Postgres {
			refuse = []string{`CREATE FUNCTION refuse_consume() RETURNS trigger LANGUAGE plpgsql AS
				$$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$`,
				`CREATE TRIGGER refuse_consume BEFORE UPDATE ON payment_methods FOR EACH ROW WHEN (NEW.pan IS NULL)
				EXECUTE FUNCTION refuse_consume()`}
			allow = []string{`DROP TRIGGER refuse_consume ON payment_methods`, `DROP FUNCTION refuse_consume()`}
		}
		changes := func(id string) (events, records int) {
			t.Helper()
			return count(t, db, `SELECT COUNT(*) FROM payment_intent_changes WHERE intent_id = $1 AND type = 'payment_intent.succeeded'`, id),
				count(t, db, `SELECT COUNT(*) FROM payment_intent_changes WHERE intent_id = $1 AND operation = 'payment_intent.confirm'`, id)
		}

		id := a.intent(t, map[string]any{"amount": 2300, "currency": "cad", "payment_method": a.method(t, cardtest.Visa)}).Str("id")
		for _, q := range refuse {
			exec(q)
		}
		if _, err := srv.Checkout().Confirm(ctx, who(t, a), id, checkout.ConfirmParams{Source: payment.SourceHPP}); err == nil {
			t.Fatal("the confirmation settled although the database refused its transaction")
		}
		if ev, rec := changes(id); ev != 0 || rec != 0 {
			t.Fatalf("after the rollback: %d changes with payment_intent.succeeded, %d records of the confirmation; want none", ev, rec)
		}
		for _, e := range a.ok(t, "GET", "/v1/events?type=payment_intent.*", nil).Body["data"].([]any) {
			if typ := e.(map[string]any)["type"]; typ != "payment_intent.created" {
				t.Fatalf("the events API lists %v after the rollback", typ)
			}
		}

		for _, q := range allow {
			exec(q)
		}
		clk.Advance(time.Hour) // the operation's lease has run out: recovery settles it from the ledger
		if err := srv.Checkout().Recover(ctx); err != nil {
			t.Fatal(err)
		}
		status(t, a.ok(t, "GET", path(id), nil), "succeeded")
		if ev, rec := changes(id); ev != 1 || rec != 1 {
			t.Fatalf("settled: %d changes with payment_intent.succeeded, %d records of the confirmation; want 1 each", ev, rec)
		}
	})
}
