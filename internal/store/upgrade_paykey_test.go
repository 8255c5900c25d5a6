package store_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
)

// beforeSealedPayKeys is the last schema whose invoices kept their pay key in clear.
const beforeSealedPayKeys = 52

// The upgrade that seals the invoices' pay keys (migration 00053, and the invoice service at start),
// on both backends: an invoice made before it, whose key was stored in clear, keeps its links — its
// page opens with the same key and the API shows the same payment_url — and its row holds the key only
// as its hash and sealed.
func TestUpgradeSealsInvoicePayKeys(t *testing.T) {
	for name, open := range unmigrated() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := open(t)
			if err := db.MigrateTo(ctx, beforeSealedPayKeys); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			var creds auth.Credentials
			err := db.Write(ctx, func(tx *store.Tx) error {
				m, err := merchant.Create(ctx, tx, merchant.New{Name: "Old Shop", Email: "old-invoices@example.com"}, now)
				if err != nil {
					return err
				}
				creds, err = auth.CreateClient(ctx, tx, m.ID, auth.DefaultValidity, now)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			const key = "OLDPAYKEY234567OLDPAYKEY2A" // 26 characters of [A-Z2-7], as rand.Text makes them
			mustExec(t, db, `INSERT INTO invoices (lookup_id, merchant_id, invoice_number, status, pay_key, currency, scale, items,
				subtotal_amount, tax_amount, total_amount, created_at, updated_at)
				VALUES ('OLDINVOICE', $1, 'OLD-1', 'DRAFT', $2, 'CAD', 2,
				'[{"description":"Old work","quantity":1000,"unit_price":5000,"total":5000,"tax":0}]', 5000, 0, 5000, $3, $3)`,
				creds.MerchantID, key, now.UnixMilli())

			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			srv := servertest.Start(t, db, server.Config{})
			var hash string
			var sealed []byte
			if err := db.Reader().QueryRowContext(ctx, `SELECT pay_key_hash, pay_key_sealed FROM invoices WHERE lookup_id = 'OLDINVOICE'`).
				Scan(&hash, &sealed); err != nil {
				t.Fatal(err)
			}
			if len(hash) != 64 || len(sealed) == 0 || strings.Contains(string(sealed), key) {
				t.Fatalf("the invoice's row after the upgrade: pay_key_hash %q, pay_key_sealed %d bytes", hash, len(sealed))
			}

			resp, err := http.Get(srv.URL + "/invoice/" + key + "/pay")
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Invoice OLD-1") {
				t.Fatalf("the invoice's page after the upgrade: %d\n%s", resp.StatusCode, page)
			}
			tok, err := (&clientcredentials.Config{ClientID: creds.ClientID, ClientSecret: creds.ClientSecret, TokenURL: srv.URL + "/oauth/token"}).Token(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r := srv.Do(t, "GET", "/invoice-service/invoice/OLDINVOICE", nil, "Authorization", "Bearer "+tok.AccessToken)
			if r.Status != http.StatusOK || r.Str("payment_url") != srv.URL+"/invoice/"+key+"/pay" {
				t.Fatalf("the invoice after the upgrade: %d %s", r.Status, r.Raw)
			}
		})
	}
}
