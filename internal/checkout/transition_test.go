package checkout_test

import (
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// path is the path of an intent, or of an action on it.
func path(id string, action ...string) string {
	p := "/v1/payment-intents/" + id
	for _, a := range action {
		p += "/" + a
	}
	return p
}

// transactions lists the merchant's ledger through the gateway API, newest first, by transaction_id.
func transactions(t *testing.T, a *account) map[string]map[string]any {
	t.Helper()
	r := a.m.Do(t, "GET", "/transaction-service/transaction", nil)
	if r.Status != 200 {
		t.Fatalf("transaction list: %d %s", r.Status, r.Raw)
	}
	out := map[string]map[string]any{}
	for _, e := range r.Body["entities"].([]any) {
		m := e.(map[string]any)
		out[m["transaction_id"].(string)] = m
	}
	return out
}

// status fails t unless r is a 200 with the intent in status.
func status(t *testing.T, r servertest.Response, want string) servertest.Response {
	t.Helper()
	if r.Status != 200 || r.Str("status") != want {
		t.Fatalf("got %d %s; want status %s", r.Status, r.Raw, want)
	}
	return r
}

// requires_payment_method --confirm--> succeeded (automatic capture): the sale is a ledger transaction
// in the gateway's list, source E_COMMERCE, named by latest_charge.
func TestConfirmAutomatic(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		pm := a.ok(t, "POST", "/v1/payment-methods", map[string]any{"type": "card",
			"card":            map[string]any{"number": cardtest.Visa, "exp_month": 12, "exp_year": 2040},
			"billing_details": map[string]any{"email": "ada@example.com", "address": map[string]any{"city": "Toronto", "country": "CA"}}}).Str("id")
		in := a.intent(t, map[string]any{"amount": 4200, "currency": "cad", "description": "Lamp"})
		done := status(t, a.do(t, "POST", path(in.Str("id"), "confirm"), map[string]any{"payment_method_id": pm}), "succeeded")
		if num(done, "amount_received") != 4200 || num(done, "amount_capturable") != 0 || done.Str("payment_method") != pm ||
			done.Body["last_payment_error"] != nil || len(done.Str("latest_charge")) != 20 {
			t.Fatalf("confirmed %s", done.Raw)
		}
		tx := transactions(t, a)[done.Str("latest_charge")]
		if tx == nil || tx["transaction_type"] != "SALE" || tx["transaction_result"] != "APPROVED" || tx["transaction_source"] != "E_COMMERCE" ||
			tx["amount"].(interface{ String() string }).String() != "42.00" || tx["currency"] != "CAD" || tx["card_suffix"] != "4242" ||
			tx["email"] != "ada@example.com" || tx["city"] != "Toronto" || tx["description"] != "Lamp" {
			t.Fatalf("ledger transaction %v", tx)
		}
		if string(a.ok(t, "GET", path(in.Str("id")), nil).Raw) != string(done.Raw) {
			t.Fatal("GET differs from the confirmation's answer")
		}
		// succeeded is final.
		for _, action := range []string{"confirm", "capture", "cancel"} {
			r := a.do(t, "POST", path(in.Str("id"), action), nil)
			wantError(t, r, 409, "payment_intent_unexpected_state", "")
		}
		wantError(t, a.do(t, "PATCH", path(in.Str("id")), map[string]any{"amount": 1}), 409, "payment_intent_unexpected_state", "")
		if n := count(t, db, `SELECT COUNT(*) FROM `+intentRecords+` WHERE resource = $1 AND operation = 'payment_intent.confirm' AND detail = 'succeeded'`,
			"payment_intent/"+in.Str("id")); n != 1 {
			t.Fatalf("%d audit records of the confirmation", n)
		}
	})
}

// requires_payment_method --confirm--> requires_capture --capture--> succeeded, for all or part of it;
// latest_charge is the authorization, then the capture that collected the money.
func TestConfirmManualThenCapture(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		for _, tc := range []struct {
			name    string
			body    any
			capture int64
		}{
			{"all by default", nil, 9900},
			{"all", map[string]any{"amount_to_capture": 9900}, 9900},
			{"part", map[string]any{"amount_to_capture": 2500}, 2500},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in := a.intent(t, map[string]any{"amount": 9900, "currency": "usd", "capture_method": "manual"})
				held := status(t, a.do(t, "POST", path(in.Str("id"), "confirm"), map[string]any{"payment_method": a.method(t, cardtest.Mastercard)}),
					"requires_capture")
				if num(held, "amount_capturable") != 9900 || num(held, "amount_received") != 0 {
					t.Fatalf("held %s", held.Raw)
				}
				for _, bad := range []any{map[string]any{"amount_to_capture": 9901}, map[string]any{"amount_to_capture": 0},
					map[string]any{"amount_to_capture": 25.5}, map[string]any{"amount_to_capture": "2500"}} {
					wantError(t, a.do(t, "POST", path(in.Str("id"), "capture"), bad), 400, "invalid_request", "amount_to_capture")
				}
				wantError(t, a.do(t, "POST", path(in.Str("id"), "capture"), map[string]any{"amount": 1}), 400, "unknown_field", "amount")
				done := status(t, a.do(t, "POST", path(in.Str("id"), "capture"), tc.body), "succeeded")
				if num(done, "amount_received") != tc.capture || num(done, "amount_capturable") != 0 || done.Str("latest_charge") == held.Str("latest_charge") {
					t.Fatalf("captured %s", done.Raw)
				}
				txs := transactions(t, a)
				if c := txs[done.Str("latest_charge")]; c["transaction_type"] != "CAPTURE" || c["original_transaction_id"] != held.Str("latest_charge") {
					t.Fatalf("latest_charge after the capture: %v", c)
				}
				if auth := txs[held.Str("latest_charge")]; auth["transaction_type"] != "AUTHORIZATION" || auth["transaction_source"] != "E_COMMERCE" {
					t.Fatalf("authorization %v", auth)
				}
				captures := 0
				for _, tx := range txs {
					if tx["transaction_type"] == "CAPTURE" && tx["original_transaction_id"] == held.Str("latest_charge") {
						captures++
					}
				}
				if captures != 1 {
					t.Fatalf("%d captures in the ledger", captures)
				}
				wantError(t, a.do(t, "POST", path(in.Str("id"), "capture"), nil), 409, "payment_intent_unexpected_state", "")
			})
		}
	})
}

// A decline returns the intent to requires_payment_method with last_payment_error {code, decline_code,
// message}; the payment method is used up; another one can succeed.
func TestDecline(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		for _, tc := range []struct {
			card, code, decline, message string
		}{
			{cardtest.Declined, "card_declined", "generic_decline", "Declined"},
			{cardtest.InsufficientFunds, "card_declined", "insufficient_funds", "Insufficient funds"},
			{cardtest.StolenCard, "card_declined", "stolen_card", "Stolen card"},
			{cardtest.ExpiredCard, "expired_card", "expired_card", "Expired card"},
			{cardtest.IncorrectCVC, "incorrect_cvc", "incorrect_cvc", "Incorrect CVC"},
			{cardtest.ProcessingError, "processing_error", "processing_error", "Processing error"},
		} {
			t.Run(tc.code+"/"+tc.decline, func(t *testing.T) {
				in := a.intent(t, map[string]any{"amount": 1500, "currency": "cad"})
				pm := a.method(t, tc.card)
				r := status(t, a.do(t, "POST", path(in.Str("id"), "confirm"), map[string]any{"payment_method_id": pm}), "requires_payment_method")
				e, _ := r.Body["last_payment_error"].(map[string]any)
				if e["code"] != tc.code || e["decline_code"] != tc.decline || e["message"] != tc.message || len(e) != 3 ||
					r.Body["payment_method"] != nil || num(r, "amount_received") != 0 {
					t.Fatalf("declined %s", r.Raw)
				}
				declined := transactions(t, a)[r.Str("latest_charge")]
				if declined["transaction_result"] != "DECLINED" || declined["transaction_type"] != "SALE" {
					t.Fatalf("ledger %v", declined)
				}
				wantError(t, a.do(t, "POST", path(in.Str("id"), "confirm"), map[string]any{"payment_method_id": pm}), 400, "payment_method_unusable", "payment_method")
				wantError(t, a.do(t, "POST", path(in.Str("id"), "confirm"), nil), 400, "invalid_request", "payment_method")
				ok := status(t, a.do(t, "POST", path(in.Str("id"), "confirm"), map[string]any{"payment_method_id": a.method(t, cardtest.Visa)}), "succeeded")
				if ok.Body["last_payment_error"] != nil || ok.Str("latest_charge") == r.Str("latest_charge") {
					t.Fatalf("retry %s", ok.Raw)
				}
				if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE idempotency_key LIKE $1`, in.Str("id")+" %"); n != 2 {
					t.Fatalf("%d ledger transactions for the intent, want 2", n)
				}
			})
		}
	})
}

// An intent given a payment method is requires_confirmation; confirming it uses that method.
// Update changes an intent before its confirmation only.
func TestRequiresConfirmationAndUpdate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		in := a.intent(t, map[string]any{"amount": 1000, "currency": "cad", "metadata": map[string]any{"a": "1", "b": "2"}})
		id := in.Str("id")
		u := status(t, a.do(t, "PATCH", path(id), map[string]any{"amount": 1200, "currency": "usd", "capture_method": "manual",
			"metadata": map[string]any{"b": "", "c": "3"}, "description": "Lamp", "receipt_email": "ada@example.com"}), "requires_payment_method")
		if num(u, "amount") != 1200 || u.Str("currency") != "usd" || u.Str("capture_method") != "manual" || u.Str("description") != "Lamp" ||
			u.Body["metadata"].(map[string]any)["a"] != "1" || u.Body["metadata"].(map[string]any)["c"] != "3" || len(u.Body["metadata"].(map[string]any)) != 2 {
			t.Fatalf("updated %s", u.Raw)
		}
		if c := status(t, a.do(t, "PATCH", path(id), map[string]any{"description": ""}), "requires_payment_method"); c.Body["description"] != nil {
			t.Fatalf("cleared description: %s", c.Raw)
		}
		for _, bad := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"amount": 0}, "amount"}, {map[string]any{"currency": "eur"}, "currency"},
			{map[string]any{"capture_method": "automatic_async"}, "capture_method"}, {map[string]any{"payment_method_types": []string{"link"}}, "payment_method_types"},
		} {
			wantError(t, a.do(t, "PATCH", path(id), bad.body), 400, "invalid_request", bad.field)
		}
		wantError(t, a.do(t, "PATCH", path(id), map[string]any{"status": "succeeded"}), 400, "unknown_field", "status")
		pm := a.method(t, cardtest.Visa)
		rc := status(t, a.do(t, "PATCH", path(id), map[string]any{"payment_method": pm}), "requires_confirmation")
		if rc.Str("payment_method") != pm {
			t.Fatalf("with a method %s", rc.Raw)
		}
		// Still changeable in requires_confirmation.
		status(t, a.do(t, "PATCH", path(id), map[string]any{"amount": 1300}), "requires_confirmation")
		held := status(t, a.do(t, "POST", path(id, "confirm"), nil), "requires_capture")
		if num(held, "amount_capturable") != 1300 || held.Str("payment_method") != pm {
			t.Fatalf("confirmed %s", held.Raw)
		}
		wantError(t, a.do(t, "PATCH", path(id), map[string]any{"metadata": map[string]any{"d": "4"}}), 409, "payment_intent_unexpected_state", "")
		// Created with a method, it needs only the confirmation.
		direct := a.intent(t, map[string]any{"amount": 800, "currency": "cad", "payment_method": a.method(t, cardtest.Amex)})
		status(t, direct, "requires_confirmation")
		status(t, a.do(t, "POST", path(direct.Str("id"), "confirm"), map[string]any{}), "succeeded")
		if n := count(t, db, `SELECT COUNT(*) FROM `+intentRecords+` WHERE resource = $1 AND operation = 'payment_intent.update'`, "payment_intent/"+id); n != 4 {
			t.Fatalf("%d audit records of updates, want 4", n)
		}
	})
}

// cancel from requires_payment_method, requires_confirmation and requires_capture (voiding the
// authorization); canceled is final.
func TestCancel(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		rpm := a.intent(t, map[string]any{"amount": 1000, "currency": "cad"})
		rc := a.intent(t, map[string]any{"amount": 1000, "currency": "cad", "payment_method": a.method(t, cardtest.Visa)})
		auth := a.intent(t, map[string]any{"amount": 1000, "currency": "cad", "capture_method": "manual"})
		held := status(t, a.do(t, "POST", path(auth.Str("id"), "confirm"), map[string]any{"payment_method_id": a.method(t, cardtest.Visa)}), "requires_capture")
		// requires_action comes with 3-D Secure; an intent waiting for a challenge holds no money.
		action := a.intent(t, map[string]any{"amount": 1000, "currency": "cad"})
		if _, err := db.Raw().Exec(`UPDATE payment_intents SET status = 'requires_action' WHERE intent_id = $1`, action.Str("id")); err != nil {
			t.Fatal(err)
		}
		status(t, a.ok(t, "GET", path(action.Str("id")), nil), "requires_action")
		wantError(t, a.do(t, "POST", path(action.Str("id"), "capture"), nil), 409, "payment_intent_unexpected_state", "")
		wantError(t, a.do(t, "PATCH", path(action.Str("id")), map[string]any{"amount": 5}), 409, "payment_intent_unexpected_state", "")
		wantError(t, a.do(t, "POST", path(rpm.Str("id"), "cancel"), map[string]any{"cancellation_reason": "bored"}), 400, "invalid_request", "cancellation_reason")
		wantError(t, a.do(t, "POST", path(rpm.Str("id"), "cancel"), map[string]any{"reason": "duplicate"}), 400, "unknown_field", "reason")
		for _, tc := range []struct {
			name, id, reason string
		}{
			{"requires_payment_method", rpm.Str("id"), "abandoned"},
			{"requires_confirmation", rc.Str("id"), ""},
			{"requires_action", action.Str("id"), "fraudulent"},
			{"requires_capture", auth.Str("id"), "requested_by_customer"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var body any
				if tc.reason != "" {
					body = map[string]any{"cancellation_reason": tc.reason}
				}
				c := status(t, a.do(t, "POST", path(tc.id, "cancel"), body), "canceled")
				if num(c, "canceled_at") == 0 || c.Str("cancellation_reason") != tc.reason || num(c, "amount_capturable") != 0 || num(c, "amount_received") != 0 {
					t.Fatalf("canceled %s", c.Raw)
				}
				for _, action := range []string{"confirm", "capture", "cancel"} {
					wantError(t, a.do(t, "POST", path(tc.id, action), nil), 409, "payment_intent_unexpected_state", "")
				}
			})
		}
		voids := 0
		for _, tx := range transactions(t, a) {
			if tx["transaction_type"] == "VOID" && tx["original_transaction_id"] == held.Str("latest_charge") && tx["transaction_result"] == "APPROVED" {
				voids++
			}
		}
		if voids != 1 {
			t.Fatalf("%d voids of the authorization", voids)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1 AND kind <> 'AUTHORIZATION' AND kind <> 'VOID'`, a.m.ID); n != 0 {
			t.Fatalf("%d other ledger transactions: a cancel without a hold moves no money", n)
		}
	})
}

// A capture the processor declines (the hold lapsed) leaves the intent in requires_capture with
// last_payment_error; it can still be canceled.
func TestCaptureDeclined(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		srv := start(t, db, server.Config{Now: clk.Now, Simulator: simulator.Config{HoldDays: 1}})
		a := newAccount(t, srv)
		in := a.intent(t, map[string]any{"amount": 3000, "currency": "cad", "capture_method": "manual"})
		status(t, a.do(t, "POST", path(in.Str("id"), "confirm"), map[string]any{"payment_method_id": a.method(t, cardtest.Visa)}), "requires_capture")
		clk.Advance(25 * time.Hour)
		r := status(t, a.do(t, "POST", path(in.Str("id"), "capture"), nil), "requires_capture")
		e, _ := r.Body["last_payment_error"].(map[string]any)
		if e["code"] != "charge_expired_for_capture" || e["decline_code"] != "authorization_expired" || num(r, "amount_capturable") != 3000 {
			t.Fatalf("declined capture %s", r.Raw)
		}
		status(t, a.do(t, "POST", path(in.Str("id"), "cancel"), nil), "canceled")
	})
}
