package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/cardenc/cardenctest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// amex2 is a second American Express test number.
const amex2 = "371449635398431"

// A raw-bytes scan of both databases finds no API key, hosted-page URL secret, card number or CVV
// after the idempotent calls of every family. Every call below carries an
// Idempotency-Key, and every card travels with a four-digit CVV that the database did not contain
// before. Afterwards the raw database holds none of them, in any encoding, nor a plain SHA-256 of any
// request (from which a card's missing digits and its CVV can be found by trying them all).
func TestIdempotentCallsLeaveNoSecretsAtRest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		srv := servertest.Start(t, db, server.Config{})
		m := srv.NewMerchant(t)
		cvv := cardtest.AbsentCVV(t, storetest.RawData(t, db))
		secrets := map[string]string{"the CVV": cvv}
		for _, pan := range []string{cardtest.Amex, amex2, cardtest.Mastercard} {
			secrets["card number "+pan[:6]+"…"+pan[len(pan)-4:]] = pan
		}
		var fixtureKey checkout.NewKey
		err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			fixtureKey, err = checkout.CreateKey(ctx, tx, "acct_"+m.ID, checkout.AllPermissions, "", time.Now())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		secrets["the API key of the v1 calls"] = fixtureKey.Key
		v1 := func(t testing.TB, method, path string, body any, hdr ...string) servertest.Response {
			return srv.Do(t, method, path, body, append([]string{checkout.HeaderAPIKey, fixtureKey.Key, checkout.HeaderAccount, "acct_" + m.ID}, hdr...)...)
		}
		calls := 0
		call := func(do func(testing.TB, string, string, any, ...string) servertest.Response, method, path string, body map[string]any) servertest.Response {
			t.Helper()
			calls++
			r := do(t, method, path, body, "Idempotency-Key", "call-"+strconv.Itoa(calls))
			if r.Status != 200 {
				t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
			}
			js, _ := json.Marshal(body) // what servertest sends
			for i, plain := range [][]byte{js, append([]byte(method+" "+path+"?\n"), js...)} {
				sum := sha256.Sum256(plain)
				secrets["a plain SHA-256 ("+strconv.Itoa(i)+") of "+method+" "+path] = string(sum[:])
			}
			return r
		}
		k, err := srv.CardEncryption().Current(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		toks := cardenctest.Encrypt(t, cardenctest.Input{Key: k.Encoded(), Cards: [][4]string{{cardtest.Amex, "12", "40", cvv}, {amex2, "12", "40", cvv}}})
		fields := func(pan, amount string) map[string]any {
			return map[string]any{"amount": amount, "card_number": pan, "card_expiry_month": "12", "card_expiry_year": "40", "cvv2": cvv}
		}

		// The gateway API: transactions, customers and cards, stored-card payments, plans, subscriptions.
		sale := call(m.Do, "POST", "/transaction-service/sale", fields(cardtest.Amex, "10.00"))
		call(m.Do, "POST", "/transaction-service/sale", map[string]any{"amount": "11.00", "token": toks[0]})
		auth := call(m.Do, "POST", "/transaction-service/authorize", fields(amex2, "12.00"))
		call(m.Do, "POST", "/transaction-service/capture/"+auth.Num("id"), map[string]any{})
		call(m.Do, "POST", "/transaction-service/refund/"+sale.Num("id"), map[string]any{"amount": "1.00"})
		c := call(m.Do, "POST", "/customer-service/customer", map[string]any{"email": "ada@example.com"}).Str("lookup_id")
		call(m.Do, "POST", "/customer-service/customer/"+c+"/card", map[string]any{"card_number": cardtest.Mastercard,
			"card_expiry_month": "12", "card_expiry_year": "40", "cvv2": cvv[:3]})
		call(m.Do, "POST", "/customer-service/customer/"+c+"/card", map[string]any{"token": toks[1]})
		call(m.Do, "POST", "/transaction-service/sale/customer/"+c, map[string]any{"amount": "3.00"})
		plan := call(m.Do, "POST", "/plan-service/plan", map[string]any{"name": "Gold", "amount": "5.00", "frequency": "MONTHLY"}).Str("lookup_id")
		call(m.Do, "POST", "/customer-service/customer/"+c+"/subscription", map[string]any{"plan_lookup_id": plan})

		// The v1 API: an API key, a payment method, an intent confirmed and captured; a hosted page.
		key := call(v1, "POST", "/v1/api-keys", map[string]any{"permissions": []string{"payment_intents:read"}}).Str("key")
		secrets["an API key created by the v1 API"] = key
		pm := call(v1, "POST", "/v1/payment-methods", map[string]any{"type": "card",
			"card": map[string]any{"number": cardtest.Amex, "exp_month": 12, "exp_year": 2040, "cvc": cvv}}).Str("id")
		pi := call(v1, "POST", "/v1/payment-intents", map[string]any{"amount": 1000, "currency": "cad", "capture_method": "manual"}).Str("id")
		call(v1, "POST", "/v1/payment-intents/"+pi+"/confirm", map[string]any{"payment_method_id": pm})
		call(v1, "POST", "/v1/payment-intents/"+pi+"/capture", map[string]any{})
		u := call(v1, "POST", "/v1/checkout/hosted-payment-page/sessions", map[string]any{"amount": 700, "currency": "cad"}).Str("url")
		secrets["a hosted page's URL"] = u
		secrets["a hosted page's URL secret"] = u[strings.LastIndexByte(u, '/')+1:]

		after := storetest.RawData(t, db)
		var n int
		if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM idempotency_keys WHERE status = 200`).Scan(&n); err != nil || n != calls {
			t.Fatalf("%d recorded responses of %d calls (%v)", n, calls, err)
		}
		if !strings.Contains(after, "ada@example.com") || !strings.Contains(after, "call-1") {
			t.Fatal("the raw data does not hold the customer's e-mail or an Idempotency-Key: the scan reads nothing")
		}
		storetest.NotStored(t, after, secrets)
	})
}
