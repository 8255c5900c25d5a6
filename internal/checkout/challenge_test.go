package checkout_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// hppConfirm confirms intent id with payment method pm as the hosted page does: interactive, source
// HPP, with the CVC from the same request.
func hppConfirm(srv *servertest.Server, w checkout.Who, id, pm string) (checkout.Intent, error) {
	return srv.Checkout().Confirm(context.Background(), w, id, checkout.ConfirmParams{PaymentMethod: pm, CVC: "123",
		Source: payment.SourceHPP, Interactive: true})
}

// sealed reports whether payment method pm still holds its card number.
func sealed(t *testing.T, db *store.DB, pm string) bool {
	t.Helper()
	return count(t, db, `SELECT COUNT(*) FROM payment_methods WHERE pm_id = $1 AND pan IS NOT NULL`, pm) == 1
}

// charges counts the ledger transactions of an intent's attempts.
func charges(t *testing.T, db *store.DB, intentID string) int {
	t.Helper()
	return count(t, db, `SELECT COUNT(*) FROM transactions WHERE idempotency_key LIKE $1`, intentID+" %")
}

// wantFault fails t unless err is the fault of status and code.
func wantFault(t *testing.T, err error, status int, code string) {
	t.Helper()
	var f *fault.Error
	if !errors.As(err, &f) || f.Status != status || f.Code != code {
		t.Fatalf("got %v; want %d %s", err, status, code)
	}
}

// awaiting fails t unless in waits for its challenge: requires_action, nothing charged, no operation
// pending, its payment method attached with its number; the v1 API shows next_action and refuses
// every other operation but cancel.
func awaiting(t *testing.T, a *account, db *store.DB, in checkout.Intent, err error, pm string) {
	t.Helper()
	if err != nil || in.Status != checkout.StatusRequiresAction || in.PendingOp != "" || in.PaymentMethod != pm || in.LastError != nil {
		t.Fatalf("interactive confirmation: %+v %v", in, err)
	}
	if n := charges(t, db, in.IntentID); n != 0 {
		t.Fatalf("%d ledger transactions before the challenge", n)
	}
	if !sealed(t, db, pm) {
		t.Fatal("the payment method lost its number before the challenge's charge")
	}
	r := status(t, a.ok(t, "GET", path(in.IntentID), nil), "requires_action")
	if na, _ := r.Body["next_action"].(map[string]any); na["type"] != "use_hosted_page" || len(na) != 1 || r.Body["latest_charge"] != nil {
		t.Fatalf("requires_action on the wire: %s", r.Raw)
	}
	for _, action := range []string{"confirm", "capture"} {
		wantError(t, a.do(t, "POST", path(in.IntentID, action), nil), 409, "payment_intent_unexpected_state", "")
	}
	wantError(t, a.do(t, "PATCH", path(in.IntentID), map[string]any{"amount": 1}), 409, "payment_intent_unexpected_state", "")
}

// requires_payment_method --confirm from the hosted page, 3-D Secure card--> requires_action, nothing
// charged --challenge passed--> succeeded (automatic) or requires_capture (manual, then captured), one
// APPROVED ledger transaction of source HPP; the payment method's number is then deleted.
func TestChallengePassed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		ctx := context.Background()
		w := who(t, a)
		for _, tc := range []struct {
			card, capture, want string
		}{
			{cardtest.ThreeDSecure, checkout.CaptureAutomatic, checkout.StatusSucceeded},
			{cardtest.ThreeDSecure2, checkout.CaptureAutomatic, checkout.StatusSucceeded},
			{cardtest.ThreeDSecure, checkout.CaptureManual, checkout.StatusRequiresCapture},
			{cardtest.ThreeDSecure2, checkout.CaptureManual, checkout.StatusRequiresCapture},
		} {
			t.Run(tc.card[:6]+"…"+tc.card[12:]+"/"+tc.capture, func(t *testing.T) {
				id := a.intent(t, map[string]any{"amount": 4200, "currency": "cad", "capture_method": tc.capture}).Str("id")
				pm := a.method(t, tc.card)
				in, err := hppConfirm(srv, w, id, pm)
				awaiting(t, a, db, in, err, pm)

				done, err := srv.Checkout().CompleteChallenge(ctx, w, id, true, payment.SourceHPP)
				if err != nil || done.Status != tc.want || done.LastError != nil || done.PendingOp != "" || done.LatestCharge == "" {
					t.Fatalf("challenge passed: %+v %v", done, err)
				}
				r := status(t, a.ok(t, "GET", path(id), nil), tc.want)
				if r.Body["next_action"] != nil || num(r, "amount_received")+num(r, "amount_capturable") != 4200 || r.Str("payment_method") != pm {
					t.Fatalf("after the challenge: %s", r.Raw)
				}
				tx := transactions(t, a)[done.LatestCharge]
				if tx["transaction_result"] != "APPROVED" || tx["transaction_source"] != "HPP" || tx["card_suffix"] != tc.card[12:] {
					t.Fatalf("ledger %v", tx)
				}
				if sealed(t, db, pm) {
					t.Fatal("the payment method kept its number after its charge")
				}
				if n := charges(t, db, id); n != 1 {
					t.Fatalf("%d ledger transactions, want 1", n)
				}
				_, err = srv.Checkout().CompleteChallenge(ctx, w, id, true, payment.SourceHPP)
				wantFault(t, err, 409, "payment_intent_unexpected_state")
				if tc.capture == checkout.CaptureManual {
					status(t, a.do(t, "POST", path(id, "capture"), nil), checkout.StatusSucceeded)
				}
				if n := count(t, db, `SELECT COUNT(*) FROM `+intentRecords+` WHERE resource = $1 AND operation = 'payment_intent.challenge' AND client_id = $2`,
					"payment_intent/"+id, w.ClientID); n != 1 {
					t.Fatalf("%d audit records of the challenge's charge", n)
				}
			})
		}
	})
}

// A failed challenge is a decline: a DECLINED transaction of source HPP, the intent back in
// requires_payment_method with last_payment_error authentication_failed and the method used up; the
// customer then pays with another card.
func TestChallengeFailed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		ctx := context.Background()
		w := who(t, a)
		id := a.intent(t, map[string]any{"amount": 1500, "currency": "cad"}).Str("id")
		pm := a.method(t, cardtest.ThreeDSecure2)
		in, err := hppConfirm(srv, w, id, pm)
		awaiting(t, a, db, in, err, pm)

		failed, err := srv.Checkout().CompleteChallenge(ctx, w, id, false, payment.SourceHPP)
		if err != nil || failed.Status != checkout.StatusRequiresPaymentMethod || failed.PaymentMethod != "" ||
			*failed.LastError != (checkout.PaymentError{Code: "authentication_failed", DeclineCode: "authentication_failed", Message: "Authentication failed"}) {
			t.Fatalf("challenge failed: %+v %v", failed, err)
		}
		r := status(t, a.ok(t, "GET", path(id), nil), "requires_payment_method")
		if e, _ := r.Body["last_payment_error"].(map[string]any); e["code"] != "authentication_failed" || r.Body["next_action"] != nil {
			t.Fatalf("after the failed challenge: %s", r.Raw)
		}
		tx := transactions(t, a)[failed.LatestCharge]
		if tx["transaction_result"] != "DECLINED" || tx["transaction_type"] != "SALE" || tx["transaction_source"] != "HPP" ||
			tx["transaction_message"] != "Authentication failed" {
			t.Fatalf("ledger %v", tx)
		}
		if sealed(t, db, pm) {
			t.Fatal("the payment method kept its number after its declined charge")
		}
		_, err = hppConfirm(srv, w, id, pm)
		wantFault(t, err, 400, "payment_method_unusable")

		ok, err := hppConfirm(srv, w, id, a.method(t, cardtest.Visa))
		if err != nil || ok.Status != checkout.StatusSucceeded || ok.LastError != nil || ok.LatestCharge == failed.LatestCharge {
			t.Fatalf("second card: %+v %v", ok, err)
		}
		if n := charges(t, db, id); n != 2 {
			t.Fatalf("%d ledger transactions, want 2", n)
		}
	})
}

// Where no cardholder can be challenged — a v1 API confirmation, a gateway API sale — a 3-D Secure
// card is charged without authentication and declined with authentication_required; a card that
// needs no challenge goes from the hosted page straight to its outcome.
func TestChallengeNotPossible(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		for _, card := range []string{cardtest.ThreeDSecure, cardtest.ThreeDSecure2} {
			id := a.intent(t, map[string]any{"amount": 1500, "currency": "cad"}).Str("id")
			r := status(t, a.do(t, "POST", path(id, "confirm"), map[string]any{"payment_method": a.method(t, card)}), "requires_payment_method")
			e, _ := r.Body["last_payment_error"].(map[string]any)
			if e["code"] != "authentication_required" || e["decline_code"] != "authentication_required" || e["message"] != "Authentication required" ||
				r.Body["next_action"] != nil {
				t.Fatalf("v1 confirmation of a 3-D Secure card: %s", r.Raw)
			}
			if tx := transactions(t, a)[r.Str("latest_charge")]; tx["transaction_result"] != "DECLINED" || tx["transaction_source"] != "E_COMMERCE" {
				t.Fatalf("ledger %v", tx)
			}
			_, err := srv.Checkout().CompleteChallenge(context.Background(), who(t, a), id, true, payment.SourceHPP)
			wantFault(t, err, 409, "payment_intent_unexpected_state")
		}
		sale := a.m.Do(t, "POST", "/transaction-service/sale", map[string]any{"amount": "1.00", "card_number": cardtest.ThreeDSecure,
			"card_expiry_month": "12", "card_expiry_year": "40", "cvv2": "123"})
		if sale.Status != 200 || sale.Str("transaction_result") != "DECLINED" || sale.Str("transaction_message") != "Authentication required" {
			t.Fatalf("gateway sale of a 3-D Secure card: %d %s", sale.Status, sale.Raw)
		}

		id := a.intent(t, map[string]any{"amount": 1500, "currency": "cad", "capture_method": "manual"}).Str("id")
		in, err := hppConfirm(srv, who(t, a), id, a.method(t, cardtest.Visa))
		if err != nil || in.Status != checkout.StatusRequiresCapture || charges(t, db, id) != 1 {
			t.Fatalf("interactive confirmation of a card without 3-D Secure: %+v %v", in, err)
		}
	})
}

// CompleteChallenge acts only on an intent in requires_action (409 otherwise) of the caller's own
// account (404 otherwise).
func TestCompleteChallengeRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a, b := newAccount(t, srv), newAccount(t, srv)
		ctx := context.Background()
		fresh := a.intent(t, map[string]any{"amount": 1500, "currency": "cad"}).Str("id")
		_, err := srv.Checkout().CompleteChallenge(ctx, who(t, a), fresh, true, payment.SourceHPP)
		wantFault(t, err, 409, "payment_intent_unexpected_state")

		waiting := a.intent(t, map[string]any{"amount": 1500, "currency": "cad"}).Str("id")
		pm := a.method(t, cardtest.ThreeDSecure)
		in, err := hppConfirm(srv, who(t, a), waiting, pm)
		awaiting(t, a, db, in, err, pm)
		_, err = srv.Checkout().CompleteChallenge(ctx, who(t, b), waiting, true, payment.SourceHPP)
		wantFault(t, err, 404, "not_found")
		wantError(t, b.do(t, "POST", path(waiting, "cancel"), nil), 404, "not_found", "")
		status(t, a.ok(t, "GET", path(waiting), nil), "requires_action")
		if n := charges(t, db, waiting); n != 0 || !sealed(t, db, pm) {
			t.Fatalf("another account's calls changed the intent: %d charges", n)
		}
	})
}

// An intent canceled while it waits for its challenge holds no money and keeps no card number: the
// attached payment method's sealed number is deleted with the cancel.
func TestCancelDuringChallenge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		ctx := context.Background()
		w := who(t, a)
		id := a.intent(t, map[string]any{"amount": 1500, "currency": "cad", "capture_method": "manual"}).Str("id")
		pm := a.method(t, cardtest.ThreeDSecure)
		in, err := hppConfirm(srv, w, id, pm)
		awaiting(t, a, db, in, err, pm)
		c := status(t, a.do(t, "POST", path(id, "cancel"), map[string]any{"cancellation_reason": "abandoned"}), "canceled")
		if c.Body["next_action"] != nil || c.Str("cancellation_reason") != "abandoned" {
			t.Fatalf("canceled %s", c.Raw)
		}
		if sealed(t, db, pm) {
			t.Fatal("the payment method of a canceled intent kept its number")
		}
		_, err = srv.Checkout().CompleteChallenge(ctx, w, id, true, payment.SourceHPP)
		wantFault(t, err, 409, "payment_intent_unexpected_state")
		if n := count(t, db, `SELECT COUNT(*) FROM transactions WHERE merchant_id = $1`, a.m.ID); n != 0 {
			t.Fatalf("%d ledger transactions: nothing was charged", n)
		}
	})
}

// Challenges completed at once by racing requests (a double click, two tabs) charge once: one
// request charges, the others are 409s.
func TestConcurrentChallenges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv := start(t, db, server.Config{})
		a := newAccount(t, srv)
		w := who(t, a)
		id := a.intent(t, map[string]any{"amount": 2000, "currency": "cad"}).Str("id")
		pm := a.method(t, cardtest.ThreeDSecure)
		in, err := hppConfirm(srv, w, id, pm)
		awaiting(t, a, db, in, err, pm)
		var won atomic.Int32
		servertest.Parallel(8, func(i int) {
			in, err := srv.Checkout().CompleteChallenge(context.Background(), w, id, i%2 == 0, payment.SourceHPP)
			var f *fault.Error
			switch {
			case err == nil:
				won.Add(1)
			case !errors.As(err, &f) || f.Status != 409:
				t.Errorf("racing challenge: %+v %v", in, err)
			}
		})
		if won.Load() != 1 {
			t.Fatalf("%d challenge completions charged, want 1", won.Load())
		}
		if n := charges(t, db, id); n != 1 {
			t.Fatalf("%d ledger transactions, want 1", n)
		}
	})
}

// A challenge nobody completes ends after ChallengeLifetime: the sweep returns the intent to
// requires_payment_method with authentication_required and deletes the payment method's number.
func TestChallengeExpires(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		srv := start(t, db, server.Config{Now: clk.Now})
		a := newAccount(t, srv)
		ctx := context.Background()
		w := who(t, a)
		id := a.intent(t, map[string]any{"amount": 1500, "currency": "cad"}).Str("id")
		pm := a.method(t, cardtest.ThreeDSecure)
		in, err := hppConfirm(srv, w, id, pm)
		awaiting(t, a, db, in, err, pm)
		clk.Advance(checkout.ChallengeLifetime - time.Second)
		if err := srv.Checkout().Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		status(t, a.ok(t, "GET", path(id), nil), "requires_action")
		clk.Advance(time.Second)
		if err := srv.Checkout().Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		r := status(t, a.ok(t, "GET", path(id), nil), "requires_payment_method")
		if e, _ := r.Body["last_payment_error"].(map[string]any); e["code"] != "authentication_required" || r.Body["payment_method"] != nil {
			t.Fatalf("expired challenge: %s", r.Raw)
		}
		if sealed(t, db, pm) {
			t.Fatal("the payment method of an expired challenge kept its number")
		}
		_, err = srv.Checkout().CompleteChallenge(ctx, w, id, true, payment.SourceHPP)
		wantFault(t, err, 409, "payment_intent_unexpected_state")
		if n := count(t, db, `SELECT COUNT(*) FROM `+intentRecords+` WHERE resource = $1 AND operation = 'payment_intent.challenge_expired'`,
			"payment_intent/"+id); n != 1 || charges(t, db, id) != 0 {
			t.Fatalf("%d audit records of the expiry, %d charges", n, charges(t, db, id))
		}
		status(t, a.do(t, "POST", path(id, "confirm"), map[string]any{"payment_method": a.method(t, cardtest.Visa)}), "succeeded")
	})
}

// unsure is the simulator, except that while down it cannot say whether a card needs 3-D Secure.
type unsure struct {
	*simulator.Simulator
	down atomic.Bool
}

func (u *unsure) ChallengeRequired(ctx context.Context, p processor.Payment) (bool, error) {
	if u.down.Load() {
		return false, errors.New("directory server unreachable")
	}
	return u.Simulator.ChallengeRequired(ctx, p)
}

// Crashes and failures around the challenge behave as for a confirmation: a processor that cannot say
// whether a card needs 3-D Secure is a 502 with nothing charged; a node that dies before the ledger
// leaves a claim that is released (a challenge's back to requires_action) and done afresh; one that
// dies after the ledger's answer leaves it to be settled, never charged again.
func TestChallengeAfterCrash(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		clk := clock.NewManual(time.Now())
		proc := &unsure{Simulator: simulator.New(simulator.Config{Now: clk.Now})}
		srv := start(t, db, server.Config{Now: clk.Now, Processor: proc})
		a := newAccount(t, srv)
		ctx := context.Background()
		w := who(t, a)
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := db.Raw().ExecContext(ctx, q, args...); err != nil {
				t.Fatal(err)
			}
		}
		expired := func() int64 { return clk.Now().Add(-time.Second).UnixMilli() }

		// The processor does not say whether the card needs a challenge: nothing charged, the method
		// still attached and sealed; the retry asks again.
		id := a.intent(t, map[string]any{"amount": 2500, "currency": "cad"}).Str("id")
		pm := a.method(t, cardtest.ThreeDSecure)
		proc.down.Store(true)
		_, err := hppConfirm(srv, w, id, pm)
		wantFault(t, err, 502, "processor_unavailable")
		status(t, a.ok(t, "GET", path(id), nil), "requires_confirmation")
		proc.down.Store(false)
		in, err := hppConfirm(srv, w, id, pm)
		awaiting(t, a, db, in, err, pm)

		// Died after claiming the challenge's charge, before the ledger saw it: once the lease has run
		// out the claim is released to requires_action and the outcome can be given again.
		exec(`UPDATE payment_intents SET status = 'processing', pending_op = 'challenge', attempts = attempts + 1, lease_until = $2
			WHERE intent_id = $1`, id, expired())
		status(t, a.ok(t, "GET", path(id), nil), "requires_action")
		exec(`UPDATE payment_intents SET status = 'processing', pending_op = 'challenge', attempts = attempts + 1, lease_until = $2
			WHERE intent_id = $1`, id, expired())
		done, err := srv.Checkout().CompleteChallenge(ctx, w, id, true, payment.SourceHPP)
		if err != nil || done.Status != checkout.StatusSucceeded || charges(t, db, id) != 1 {
			t.Fatalf("challenge after a claim the ledger never saw: %+v %v", done, err)
		}

		// Died after the ledger approved the challenge's charge, before the intent recorded it:
		// recovery settles it from the ledger.
		exec(`UPDATE payment_intents SET status = 'processing', pending_op = 'challenge', lease_until = $2, amount_received = 0,
			charge_id = NULL, latest_charge = NULL WHERE intent_id = $1`, id, expired())
		if err := srv.Checkout().Recover(ctx); err != nil {
			t.Fatal(err)
		}
		got := status(t, a.ok(t, "GET", path(id), nil), "succeeded")
		if got.Str("latest_charge") != done.LatestCharge || num(got, "amount_received") != 2500 || charges(t, db, id) != 1 {
			t.Fatalf("settled after the crash: %s", got.Raw)
		}

		// Died during an interactive confirmation, before the challenge was asked for: released to
		// requires_confirmation with the method attached; confirmed again, it waits for its challenge.
		id = a.intent(t, map[string]any{"amount": 900, "currency": "cad"}).Str("id")
		pm = a.method(t, cardtest.ThreeDSecure2)
		exec(`UPDATE payment_intents SET status = 'processing', pending_op = 'confirm', payment_method = $2, attempts = 1, lease_until = $3
			WHERE intent_id = $1`, id, pm, expired())
		exec(`UPDATE payment_methods SET attached_to = $1 WHERE pm_id = $2`, id, pm)
		in, err = hppConfirm(srv, w, id, pm)
		awaiting(t, a, db, in, err, pm)
		if in.Attempts != 2 {
			t.Fatalf("attempts %d, want 2", in.Attempts)
		}
		// Confirmed after such a crash with another card, the intent discards the first card's number.
		id = a.intent(t, map[string]any{"amount": 900, "currency": "cad"}).Str("id")
		pm = a.method(t, cardtest.ThreeDSecure2)
		exec(`UPDATE payment_intents SET status = 'processing', pending_op = 'confirm', payment_method = $2, attempts = 1, lease_until = $3
			WHERE intent_id = $1`, id, pm, expired())
		exec(`UPDATE payment_methods SET attached_to = $1 WHERE pm_id = $2`, id, pm)
		other := a.method(t, cardtest.ThreeDSecure)
		in, err = hppConfirm(srv, w, id, other)
		awaiting(t, a, db, in, err, other)
		if sealed(t, db, pm) {
			t.Fatal("the replaced method of an interrupted confirmation kept its number")
		}
	})
}
