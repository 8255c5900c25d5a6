package payment_test

import (
	"context"
	"strings"
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
