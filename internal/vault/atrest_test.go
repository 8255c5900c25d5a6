package vault_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// amexPM is an American Express test number that only the payment-method part of the test uses.
const amexPM = "371449635398431"

// v1Headers creates an API key for the merchant and returns the v1 API's headers for it.
func v1Headers(t *testing.T, srv *servertest.Server, merchantID string) []string {
	t.Helper()
	var k checkout.NewKey
	err := srv.DB.Write(context.Background(), func(tx *store.Tx) error {
		var err error
		k, err = checkout.CreateKey(context.Background(), tx, "acct_"+merchantID, checkout.AllPermissions, "", time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return []string{checkout.HeaderAPIKey, k.Key, checkout.HeaderAccount, "acct_" + merchantID}
}

// Card numbers are stored sealed and CVVs not at all: the raw database has neither, in any encoding.
func TestNoCardDataAtRest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		srv, m := start(t, db)
		before := storetest.RawData(t, db)
		amexCVV := cardtest.AbsentCVV(t, before)
		visaCVV := amexCVV[:3]
		c := createCustomer(t, m, map[string]any{"email": "ada@example.com"}).Str("lookup_id")
		addCard(t, m, c, cardBody(cardtest.Visa, "cvv2", visaCVV))
		addCard(t, m, c, cardBody(cardtest.Amex, "cvv2", amexCVV))
		k, _ := srv.CardEncryption().Current(context.Background(), m.ID)
		if tok := tokenFor(t, k.Encoded(), cardtest.Discover, visaCVV); tok != "" {
			addCard(t, m, c, map[string]any{"token": tok})
		}
		m.Do(t, "POST", "/transaction-service/sale/customer/"+c, map[string]any{"amount": "3.00"})
		m.Do(t, "POST", "/transaction-service/sale", map[string]any{"amount": "4.00", "card_number": cardtest.Mastercard,
			"card_expiry_month": "12", "card_expiry_year": "30", "cvv2": visaCVV})
		// Payment methods of the v1 API: one used by a confirmation, one left unused, both with a CVC.
		v1 := v1Headers(t, srv, m.ID)
		used := srv.Do(t, "POST", "/v1/payment-methods", map[string]any{"type": "card",
			"card": map[string]any{"number": cardtest.Visa2, "exp_month": 12, "exp_year": 2040, "cvc": visaCVV}}, v1...)
		unused := srv.Do(t, "POST", "/v1/payment-methods", map[string]any{"type": "card",
			"card": map[string]any{"number": amexPM, "exp_month": 12, "exp_year": 2040, "cvc": amexCVV}}, v1...)
		pi := srv.Do(t, "POST", "/v1/payment-intents", map[string]any{"amount": 1000, "currency": "cad"}, v1...)
		if r := srv.Do(t, "POST", "/v1/payment-intents/"+pi.Str("id")+"/confirm", map[string]any{"payment_method_id": used.Str("id")}, v1...); r.Str("status") != "succeeded" ||
			unused.Status != 200 {
			t.Fatalf("v1 payment: %s %s", r.Raw, unused.Raw)
		}
		if r := m.Do(t, "GET", "/customer-service/customer/"+c, nil); len(cards(r)) < 2 {
			t.Fatalf("cards were not stored: %s", r.Raw)
		}
		after := storetest.RawData(t, db)
		// The scan reads the rows: what is stored in clear is found.
		if !strings.Contains(after, "ada@example.com") || !strings.Contains(after, "424242") {
			t.Fatal("the raw data does not hold the customer's e-mail or a card prefix: the scan reads nothing")
		}
		secrets := map[string]string{"a CVV": amexCVV}
		for _, pan := range []string{cardtest.Visa, cardtest.Amex, cardtest.Discover, cardtest.Mastercard, cardtest.Visa2, amexPM} {
			secrets["card number "+pan[:6]+"…"+pan[len(pan)-4:]] = pan
		}
		storetest.NotStored(t, after, secrets)
	})
}
