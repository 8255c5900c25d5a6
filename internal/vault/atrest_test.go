package vault_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// rawData is everything the database holds, as bytes: the SQLite files (database, WAL, shared
// memory), or every row of every PostgreSQL table as text (bytea in hex).
func rawData(t *testing.T, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	if db.Dialect() == store.SQLite {
		path := strings.TrimPrefix(db.String(), "sqlite: ")
		var b strings.Builder
		files, _ := filepath.Glob(path + "*")
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
		if b.Len() == 0 {
			t.Fatalf("no database files at %s", path)
		}
		return b.String()
	}
	rows, err := db.Reader().QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	rows.Close()
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.Reader().QueryContext(ctx, fmt.Sprintf(`SELECT t::text FROM %q t`, table))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var row string
			rows.Scan(&row)
			b.WriteString(row)
			b.WriteByte('\n')
		}
		rows.Close()
	}
	return b.String()
}

// absentCVV picks a four-digit code that the data does not contain yet, so that finding it later can
// only mean it was stored.
func absentCVV(t *testing.T, data string) string {
	for _, c := range []string{"8317", "7391", "9157", "5931", "3719", "1793"} {
		if !strings.Contains(data, c) {
			return c
		}
	}
	t.Fatal("no absent code")
	return ""
}

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
		before := rawData(t, db)
		amexCVV := absentCVV(t, before)
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
		after := rawData(t, db)
		// The scan reads the rows: what is stored in clear is found.
		if !strings.Contains(after, "ada@example.com") || !strings.Contains(after, "424242") {
			t.Fatal("the raw data does not hold the customer's e-mail or a card prefix: the scan reads nothing")
		}
		for _, pan := range []string{cardtest.Visa, cardtest.Amex, cardtest.Discover, cardtest.Mastercard, cardtest.Visa2, amexPM} {
			for name, enc := range map[string]string{"digits": pan, "hex": hex.EncodeToString([]byte(pan)),
				"base64": base64.StdEncoding.EncodeToString([]byte(pan)), "base64url": base64.RawURLEncoding.EncodeToString([]byte(pan))} {
				if strings.Contains(after, enc) {
					t.Errorf("card number %s…%s is in the database as %s", pan[:6], pan[len(pan)-4:], name)
				}
			}
		}
		for _, cvv := range []string{amexCVV, hex.EncodeToString([]byte(amexCVV))} {
			if strings.Contains(after, cvv) {
				t.Errorf("a CVV (%s) is in the database", cvv)
			}
		}
	})
}
