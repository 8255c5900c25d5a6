package payment_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/cardenc/cardenctest"
	"github.com/kassapay/kassa/internal/processor/simulator"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// tokensFor encrypts cards with the CardEncryption script under the merchant's current key, stamped
// with the fixture's clock (the server checks a token's age against it).
func tokensFor(t *testing.T, f *fixture, m *servertest.Merchant, cards ...[4]string) []string {
	t.Helper()
	k, err := f.srv.CardEncryption().Current(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	return cardenctest.Encrypt(t, cardenctest.Input{Key: k.Encoded(), Cards: cards, Now: f.clock.Now().UnixMilli()})
}

func TestSaleWithCardToken(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		toks := tokensFor(t, f, f.m, [4]string{cardtest.Visa, "08", "30", "123"}, [4]string{cardtest.Amex, "12", "2031", "1234"},
			[4]string{cardtest.InsufficientFunds, "12", "30", "123"})
		r := post(t, f.m, "sale", map[string]any{"amount": "19.99", "token": toks[0], "email": "ada@example.com", "first_name": "Ada"})
		if r.Status != 200 || r.Str("transaction_result") != "APPROVED" || r.Str("card_type") != "VISA" || r.Str("card_suffix") != "4242" ||
			r.Str("email") != "ada@example.com" || r.Num("amount") != "19.99" {
			t.Fatalf("sale with a token: %d %s", r.Status, r.Raw)
		}
		a := post(t, f.m, "authorize", map[string]any{"amount": "5.00", "token": toks[1]})
		if a.Status != 200 || a.Str("transaction_type") != "AUTHORIZATION" || a.Str("card_type") != "AMEX" || a.Str("card_suffix") != "0005" {
			t.Fatalf("authorize with a token: %d %s", a.Status, a.Raw)
		}
		d := post(t, f.m, "sale", map[string]any{"amount": "5.00", "token": toks[2]})
		if d.Status != 200 || d.Str("transaction_result") != "DECLINED" || d.Str("transaction_message") != "Insufficient funds" {
			t.Fatalf("a declining card in a token: %d %s", d.Status, d.Raw)
		}
		for _, field := range []string{"card_number", "card_expiry_month", "card_expiry_year", "cvv2"} {
			r := post(t, f.m, "sale", map[string]any{"amount": "5.00", "token": toks[0], field: "12"})
			if r.Status != 400 || r.Str("field") != field {
				t.Errorf("token with %s: %d %s", field, r.Status, r.Raw)
			}
		}
	})
}

// Whatever is wrong with a token, the answer is the same, to the byte: status, code, field and message.
func TestInvalidCardTokensAreIndistinguishable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		other := f.srv.NewMerchant(t)
		mine := tokensFor(t, f, f.m, [4]string{cardtest.Visa, "08", "30", "123"}, [4]string{"4242424242424241", "08", "30", "123"})
		theirs := tokensFor(t, f, other, [4]string{cardtest.Visa, "08", "30", "123"})[0]
		ct := mine[0][strings.LastIndexByte(mine[0], '.')+1:]
		tampered := []byte(mine[0])
		tampered[len(tampered)-20] ^= 1
		var first string
		for name, tok := range map[string]string{
			"garbage":                "not a token",
			"unknown key":            "ct1.0000000000000000." + ct,
			"tampered":               string(tampered),
			"another merchant's key": theirs,
			"malformed card (Luhn)":  mine[1],
		} {
			r := post(t, f.m, "sale", map[string]any{"amount": "5.00", "token": tok})
			body := string(r.Raw)
			if r.Status != 400 || r.Str("error") != "invalid_card_token" || r.Str("field") != "token" {
				t.Errorf("%s: %d %s", name, r.Status, body)
			}
			if first == "" {
				first = body
			} else if body != first {
				t.Errorf("%s: the answer differs:\n%s\n%s", name, body, first)
			}
		}
		// The other merchant's token works for the other merchant.
		if r := post(t, other, "sale", map[string]any{"amount": "5.00", "token": theirs}); r.Status != 200 || r.Str("transaction_result") != "APPROVED" {
			t.Fatalf("the owner's token: %d %s", r.Status, r.Raw)
		}
	})
}

// A card token is single-use. The first use that reaches the ledger consumes the token,
// approved or declined; a second use, by a sale or an authorization, is the same 400 as a garbage
// token, to the byte. A request refused for another field does not consume it.
func TestCardTokenIsSingleUse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		toks := tokensFor(t, f, f.m, [4]string{cardtest.Visa, "08", "30", "123"}, [4]string{cardtest.InsufficientFunds, "08", "30", "123"})
		garbage := post(t, f.m, "sale", map[string]any{"amount": "5.00", "token": "not a token"})
		if garbage.Status != 400 || garbage.Str("error") != "invalid_card_token" {
			t.Fatalf("garbage token: %d %s", garbage.Status, garbage.Raw)
		}
		if r := post(t, f.m, "sale", map[string]any{"amount": "five", "token": toks[0]}); r.Status != 400 || r.Str("field") != "amount" {
			t.Fatalf("a bad amount: %d %s", r.Status, r.Raw)
		}
		if r := post(t, f.m, "sale", map[string]any{"amount": "5.00", "token": toks[0]}); r.Status != 200 || r.Str("transaction_result") != "APPROVED" {
			t.Fatalf("first use, after a request refused for its amount: %d %s", r.Status, r.Raw)
		}
		if r := post(t, f.m, "sale", map[string]any{"amount": "5.00", "token": toks[1]}); r.Status != 200 || r.Str("transaction_result") != "DECLINED" {
			t.Fatalf("first use of a declining card: %d %s", r.Status, r.Raw)
		}
		calls := f.proc.calls.Load()
		for _, tc := range []struct{ op, token string }{{"sale", toks[0]}, {"authorize", toks[0]}, {"sale", toks[1]}} {
			r := post(t, f.m, tc.op, map[string]any{"amount": "5.00", "token": tc.token})
			if r.Status != 400 || string(r.Raw) != string(garbage.Raw) {
				t.Errorf("%s with a used token: %d %s; want the garbage token's %s", tc.op, r.Status, r.Raw, garbage.Raw)
			}
		}
		if f.proc.calls.Load() != calls {
			t.Fatal("a used token reached the processor")
		}
		if got := ids(t, f.m.Do(t, "GET", "/transaction-service/transaction", nil)); len(got) != 2 {
			t.Fatalf("transactions %v, want the two first uses", got)
		}
	})
}

// Twenty sales racing with one token: exactly one is charged.
func TestRacingUsesOfOneCardToken(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		tok := tokensFor(t, f, f.m, [4]string{cardtest.Visa, "08", "30", "123"})[0]
		var won, refused atomic.Int64
		servertest.Parallel(20, func(int) {
			r := post(t, f.m, "sale", map[string]any{"amount": "5.00", "token": tok})
			switch {
			case r.Status == 200 && r.Str("transaction_result") == "APPROVED":
				won.Add(1)
			case r.Status == 400 && r.Str("error") == "invalid_card_token":
				refused.Add(1)
			default:
				t.Errorf("%d %s", r.Status, r.Raw)
			}
		})
		if won.Load() != 1 || refused.Load() != 19 || f.proc.calls.Load() != 1 {
			t.Fatalf("%d approved, %d refused, %d processor calls; want 1, 19, 1", won.Load(), refused.Load(), f.proc.calls.Load())
		}
		if got := ids(t, f.m.Do(t, "GET", "/transaction-service/transaction", nil)); len(got) != 1 {
			t.Fatalf("transactions %v", got)
		}
	})
}

// An idempotent retry of a token's first use gets the first answer, from the replay records and, when
// those are gone (a crash between the ledger and the record), from the ledger's binding of the key:
// the retry finds its transaction before its spent token could be refused.
func TestRetryOfACardTokensFirstUse(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, simulator.Config{})
		body := map[string]any{"amount": "5.00", "token": tokensFor(t, f, f.m, [4]string{cardtest.Visa, "08", "30", "123"})[0]}
		first := post(t, f.m, "authorize", body, "Idempotency-Key", "order-5")
		replay := post(t, f.m, "authorize", body, "Idempotency-Key", "order-5")
		if first.Status != 200 || string(replay.Raw) != string(first.Raw) || replay.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %s / %d %s", first.Status, first.Raw, replay.Status, replay.Raw)
		}
		err := db.Write(context.Background(), func(tx *store.Tx) error {
			_, err := tx.ExecContext(context.Background(), `DELETE FROM idempotency_keys`)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if r := post(t, f.m, "authorize", body, "Idempotency-Key", "order-5"); r.Status != 200 || r.Str("transaction_id") != first.Str("transaction_id") {
			t.Fatalf("a retry that only the ledger recognises: %d %s", r.Status, r.Raw)
		}
		if f.proc.calls.Load() != 1 {
			t.Fatalf("%d processor calls", f.proc.calls.Load())
		}
	})
}
