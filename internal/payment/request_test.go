package payment

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/merchant"
)

var testMerchant = merchant.Merchant{ID: "0000000001", DefaultCurrency: "CAD",
	Settings: merchant.Settings{Currencies: []string{"CAD", "USD"}, MaxAmountCents: 99999999, SimulatorProfile: "standard"}}

// FuzzChargeRequest: whatever body a client sends to sale or authorize, decoding never panics, every
// rejection is a 400 naming a field (or the body), and every acceptance is a valid charge.
func FuzzChargeRequest(f *testing.F) {
	for _, s := range []string{
		`{"amount":"10.00","card_number":"4242424242424242","card_expiry_month":"08","card_expiry_year":30,"cvv2":123}`,
		`{"amount":59.99,"currency":"usd","card_number":378282246310005,"card_expiry_month":12,"card_expiry_year":2030,"cvv2":"1234"}`,
		`{"amount":0,"card_number":"4242","token":"x"}`,
		`{"amount":"1e3","order_id":12,"test_mode":"true","email":"a@b.co"}`,
		`{"amount":-1,"card_number":null,"cvv2":{}}`,
		`[]`, `{`, `null`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var b chargeBody
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			return // the JSON layer's own errors are tested in httpapi
		}
		for _, kind := range []string{KindSale, KindAuthorization} {
			c, token, err := b.charge(kind, testMerchant)
			if err != nil {
				var fe *fault.Error
				if !errors.As(err, &fe) || fe.Status != 400 || fe.Field == "" || fe.Message == "" {
					t.Fatalf("%s: error %v is not a 400 naming a field", body, err)
				}
				if pan := cardtest.Find(fe.Message); pan != "" {
					t.Fatalf("error message repeats the card number: %q", fe.Message)
				}
				continue
			}
			if token != "" {
				if !c.Card.IsZero() || b.CardNumber.Set() || b.CVV2.Set() {
					t.Fatalf("%s: a token with card fields", body)
				}
				continue
			}
			if c.Card.IsZero() || c.CVV == "" || c.Expiry.Month < 1 || c.Expiry.Month > 12 || c.Amount < 0 ||
				(kind == KindSale && c.Amount == 0) || !testMerchant.Accepts(c.Currency.Code) {
				t.Fatalf("%s: accepted an invalid charge %+v", body, c)
			}
		}
	})
}

func FuzzListFilter(f *testing.F) {
	f.Add("limit=10&after=dDU&from_date=2026-01-01&to_date=2026-02-01&min_amount=1.5&transaction_status=approved")
	f.Add("before=%%&limit=99999999999999999999")
	f.Fuzz(func(t *testing.T, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		flt, err := parseFilter(q)
		if err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) || fe.Status != 400 || fe.Field == "" {
				t.Fatalf("%q: %v is not a 400 naming a parameter", query, err)
			}
			return
		}
		if flt.Limit < 0 || flt.Limit > MaxLimit || flt.Before < 0 || flt.After < 0 {
			t.Fatalf("%q: accepted %+v", query, flt)
		}
	})
}

func BenchmarkDecodeSale(b *testing.B) {
	body := []byte(`{"amount":"59.99","currency":"CAD","card_number":"4242424242424242","card_expiry_month":"08",` +
		`"card_expiry_year":"30","cvv2":"123","email":"ada@example.com","first_name":"Ada","last_name":"Lovelace","order_id":1234}`)
	b.ReportAllocs()
	for b.Loop() {
		var cb chargeBody
		if err := json.Unmarshal(body, &cb); err != nil {
			b.Fatal(err)
		}
		if _, _, err := cb.charge(KindSale, testMerchant); err != nil {
			b.Fatal(err)
		}
	}
}
