package payment_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func post(t *testing.T, m *servertest.Merchant, path string, body any, hdr ...string) servertest.Response {
	t.Helper()
	return m.Do(t, "POST", "/transaction-service/"+path, body, hdr...)
}

// ok asserts an approved transaction of kind and amount, and returns it.
func ok(t *testing.T, r servertest.Response, kind, amount string) servertest.Response {
	t.Helper()
	if r.Status != 200 || r.Str("transaction_type") != kind || r.Str("transaction_result") != "APPROVED" || r.Num("amount") != amount {
		t.Fatalf("want an approved %s of %s: %d %s", kind, amount, r.Status, r.Raw)
	}
	return r
}

// conflict asserts a 409 whose message mentions want.
func conflict(t *testing.T, r servertest.Response, want string) {
	t.Helper()
	if r.Status != 409 || !strings.Contains(strings.ToLower(r.Str("message")), want) {
		t.Fatalf("want a 409 mentioning %q: %d %s", want, r.Status, r.Raw)
	}
}

func TestAuthorizeCaptureRefund(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		m := f.m
		auth := ok(t, post(t, m, "authorize", card(cardtest.Visa, "amount", "100.00", "email", "a@example.com")), "AUTHORIZATION", "100.00")
		id := auth.Num("id")

		conflict(t, post(t, m, "refund/"+id, map[string]any{"amount": "10.00"}), "void it")
		conflict(t, post(t, m, "capture/"+id, map[string]any{"amount": "100.01"}), "exceeds the authorized 100.00")

		// {id} may be the numeric id or the transaction_id.
		capture := ok(t, post(t, m, "capture/"+auth.Str("transaction_id"), map[string]any{"amount": 60}), "CAPTURE", "60.00")
		if !capture.Bool("captured") || capture.Num("original_id") != id || capture.Str("original_transaction_id") != auth.Str("transaction_id") ||
			capture.Str("card_suffix") != "4242" || capture.Str("email") != "a@example.com" || capture.Str("transaction_id") == auth.Str("transaction_id") {
			t.Fatalf("capture: %s", capture.Raw)
		}
		// One capture per authorization; the 40.00 not captured was released.
		conflict(t, post(t, m, "capture/"+id, map[string]any{"amount": "10.00"}), "already been captured")
		conflict(t, post(t, m, "void/"+id, nil), "refund the capture")

		cid := capture.Num("id")
		ok(t, post(t, m, "refund/"+cid, map[string]any{"amount": "25.00"}), "REFUND", "25.00")
		r := ok(t, post(t, m, "refund/"+capture.Str("transaction_id"), map[string]any{"amount": "35", "test_mode": true}), "REFUND", "35.00")
		if !r.Bool("test_mode") || r.Bool("captured") || r.Num("original_id") != cid {
			t.Fatalf("refund: %s", r.Raw)
		}
		conflict(t, post(t, m, "refund/"+cid, map[string]any{"amount": "0.01"}), "exceeds the 0.00 that remains")

		// Refunds of a sale, partial, within what was captured.
		sale := ok(t, post(t, m, "sale", card(cardtest.Amex, "amount", "30.00")), "SALE", "30.00")
		ok(t, post(t, m, "refund/"+sale.Num("id"), map[string]any{"amount": "10.00"}), "REFUND", "10.00")
		conflict(t, post(t, m, "refund/"+sale.Num("id"), map[string]any{"amount": "20.01"}), "exceeds the 20.00 that remains")
		ok(t, post(t, m, "refund/"+sale.Num("id"), map[string]any{"amount": "20.00"}), "REFUND", "20.00")

		// A refund is not refundable, nor capturable; a sale is not capturable or voidable.
		conflict(t, post(t, m, "refund/"+r.Num("id"), map[string]any{"amount": "1.00"}), "only a sale or a capture")
		conflict(t, post(t, m, "capture/"+sale.Num("id"), nil), "only an authorization can be captured")
		conflict(t, post(t, m, "void/"+sale.Num("id"), nil), "refund a sale")
	})
}

func TestVoid(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		m := f.m
		auth := ok(t, post(t, m, "authorize", card(cardtest.Visa, "amount", "80.00")), "AUTHORIZATION", "80.00")
		void := ok(t, post(t, m, "void/"+auth.Num("id"), nil), "VOID", "80.00")
		if void.Bool("captured") || void.Num("original_id") != auth.Num("id") {
			t.Fatalf("void: %s", void.Raw)
		}
		conflict(t, post(t, m, "capture/"+auth.Num("id"), map[string]any{"amount": "10.00"}), "voided")
		conflict(t, post(t, m, "void/"+auth.Num("id"), nil), "voided")
		conflict(t, post(t, m, "refund/"+void.Num("id"), map[string]any{"amount": "1.00"}), "only a sale or a capture")
	})
}

func TestCaptureDefaultsToTheWholeAuthorization(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	auth := ok(t, post(t, f.m, "authorize", card(cardtest.Discover, "amount", "12.34")), "AUTHORIZATION", "12.34")
	ok(t, post(t, f.m, "capture/"+auth.Num("id"), nil), "CAPTURE", "12.34")
}

func TestCardVerification(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	v := ok(t, post(t, f.m, "authorize", card(cardtest.Visa, "amount", 0)), "AUTHORIZATION", "0.00")
	conflict(t, post(t, f.m, "capture/"+v.Num("id"), nil), "card verification")
	conflict(t, post(t, f.m, "void/"+v.Num("id"), nil), "card verification")
	declined := post(t, f.m, "authorize", card(cardtest.StolenCard, "amount", 0))
	if declined.Status != 200 || declined.Str("transaction_result") != "DECLINED" {
		t.Fatalf("verification of a stolen card: %d %s", declined.Status, declined.Raw)
	}
}

func TestFollowUpValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	sale := ok(t, post(t, f.m, "sale", card(cardtest.Visa, "amount", "50.00")), "SALE", "50.00")
	declined := post(t, f.m, "sale", card(cardtest.Declined))
	id := sale.Num("id")
	for _, tc := range []struct {
		name, path string
		body       any
		status     int
		field      string
	}{
		{"refund without amount", "refund/" + id, map[string]any{}, 400, "amount"},
		{"refund of zero", "refund/" + id, map[string]any{"amount": 0}, 400, "amount"},
		{"refund negative", "refund/" + id, map[string]any{"amount": "-1"}, 400, "amount"},
		{"refund too precise", "refund/" + id, map[string]any{"amount": "1.001"}, 400, "amount"},
		{"refund in another currency", "refund/" + id, map[string]any{"amount": "1.00", "currency": "USD"}, 400, "currency"},
		{"refund test_mode not a flag", "refund/" + id, map[string]any{"amount": "1.00", "test_mode": 3}, 400, "test_mode"},
		{"refund of a declined sale", "refund/" + declined.Num("id"), map[string]any{"amount": "1.00"}, 409, ""},
		{"refund of an unknown id", "refund/999999", map[string]any{"amount": "1.00"}, 404, ""},
		{"refund of an unknown transaction_id", "refund/AAAAAAAAAAAAAAAAAAAA", map[string]any{"amount": "1.00"}, 404, ""},
		{"refund of a nonsense id", "refund/12ab", map[string]any{"amount": "1.00"}, 404, ""},
		{"capture with malformed JSON", "capture/" + id, "{", 400, ""},
	} {
		r := post(t, f.m, tc.path, tc.body)
		if r.Status != tc.status || r.Str("field") != tc.field {
			t.Errorf("%s: %d %s; want %d naming %q", tc.name, r.Status, r.Raw, tc.status, tc.field)
		}
	}
	// The currency may be sent when it is the transaction's.
	ok(t, post(t, f.m, "refund/"+id, map[string]any{"amount": "1.00", "currency": "cad"}), "REFUND", "1.00")
}

// An authorization hold lapses after the configured days: a later capture is declined, and the
// authorization can still be voided.
func TestHoldExpiry(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{HoldDays: 7})
		fresh := ok(t, post(t, f.m, "authorize", card(cardtest.Visa, "amount", "20.00")), "AUTHORIZATION", "20.00")
		old := ok(t, post(t, f.m, "authorize", card(cardtest.Visa, "amount", "20.00")), "AUTHORIZATION", "20.00")
		f.clock.Advance(6 * 24 * time.Hour)
		f.m.NewToken(t)
		ok(t, post(t, f.m, "capture/"+fresh.Num("id"), nil), "CAPTURE", "20.00")
		f.clock.Advance(24 * time.Hour)
		f.m.NewToken(t)
		r := post(t, f.m, "capture/"+old.Num("id"), nil)
		if r.Status != 200 || r.Str("transaction_type") != "CAPTURE" || r.Str("transaction_result") != "DECLINED" ||
			r.Str("transaction_message") != "Authorization expired" {
			t.Fatalf("capture after the hold lapsed: %d %s", r.Status, r.Raw)
		}
		ok(t, post(t, f.m, "void/"+old.Num("id"), nil), "VOID", "20.00")
	})
}

func TestInsufficientScope(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.SQLite(t), simulator.Config{})
	cfg := clientcredentials.Config{ClientID: f.m.Creds.ClientID, ClientSecret: f.m.Creds.ClientSecret,
		TokenURL: f.srv.URL + "/oauth/token", Scopes: []string{"invoice"}}
	tok, err := cfg.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := f.srv.Do(t, "POST", "/transaction-service/sale", card(cardtest.Visa), "Authorization", "Bearer "+tok.AccessToken)
	if r.Status != 403 || r.Str("error") != "insufficient_scope" {
		t.Fatalf("token without ecom: %d %s", r.Status, r.Raw)
	}
}

// A refund or void that the transaction's state forbids names the transaction to act on and the call
// that works, and that call works: no answer sends the caller from refund to void and back.
func TestRefundVoidErrorsNameTheTransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		m := f.m
		names := func(r servertest.Response, code string, want ...string) {
			t.Helper()
			if r.Status != 409 || r.Str("error") != code {
				t.Fatalf("want a 409 %s: %d %s", code, r.Status, r.Raw)
			}
			for _, w := range want {
				if !strings.Contains(r.Str("message"), w) {
					t.Fatalf("%q does not name %q", r.Str("message"), w)
				}
			}
		}
		// An open authorization: void it (the call named works after a refund is refused).
		open := ok(t, post(t, m, "authorize", card(cardtest.Visa, "amount", "40.00")), "AUTHORIZATION", "40.00")
		oid := open.Str("transaction_id")
		names(post(t, m, "refund/"+oid, map[string]any{"amount": "1.00"}), "refund_not_allowed",
			"POST /transaction-service/void/"+oid, "POST /transaction-service/capture/"+oid)
		ok(t, post(t, m, "void/"+oid, nil), "VOID", "40.00")

		// A captured authorization: refund and void both name the capture, and its refund works.
		auth := ok(t, post(t, m, "authorize", card(cardtest.Visa, "amount", "50.00")), "AUTHORIZATION", "50.00")
		capture := ok(t, post(t, m, "capture/"+auth.Num("id"), nil), "CAPTURE", "50.00")
		cid := capture.Str("transaction_id")
		names(post(t, m, "refund/"+auth.Num("id"), map[string]any{"amount": "1.00"}), "refund_not_allowed", cid, "POST /transaction-service/refund/"+cid)
		names(post(t, m, "void/"+auth.Num("id"), nil), "already_captured", cid, "POST /transaction-service/refund/"+cid)
		names(post(t, m, "capture/"+auth.Num("id"), nil), "already_captured", cid)
		names(post(t, m, "void/"+cid, nil), "void_not_allowed", "POST /transaction-service/refund/"+cid)
		refund := ok(t, post(t, m, "refund/"+cid, map[string]any{"amount": "1.00"}), "REFUND", "1.00")

		// A sale: void names its refund; a refund names the sale or capture it refunds.
		sale := ok(t, post(t, m, "sale", card(cardtest.Visa, "amount", "20.00")), "SALE", "20.00")
		sid := sale.Str("transaction_id")
		names(post(t, m, "void/"+sid, nil), "void_not_allowed", "POST /transaction-service/refund/"+sid)
		names(post(t, m, "refund/"+refund.Str("transaction_id"), map[string]any{"amount": "1.00"}), "refund_not_allowed",
			"POST /transaction-service/refund/"+cid)

		// A voided authorization: nothing to refund, and the void is named.
		names(post(t, m, "refund/"+oid, map[string]any{"amount": "1.00"}), "refund_not_allowed", "voided")

		// A declined payment: nothing to refund or void.
		declined := post(t, m, "sale", card(cardtest.Declined))
		names(post(t, m, "refund/"+declined.Str("transaction_id"), map[string]any{"amount": "1.00"}), "refund_not_allowed", "declined")
		names(post(t, m, "void/"+declined.Str("transaction_id"), nil), "void_not_allowed", "declined")
	})
}
