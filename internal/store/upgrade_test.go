package store_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// beforeIdempotencyPerCredential is the last schema whose idempotency records were kept per merchant,
// with a plain hash of the request and the response in clear.
const beforeIdempotencyPerCredential = 14

// The upgrade to idempotency records per credential (migrations 15 and 16): no byte of the old
// records survives, not even of those purged before (SQLite keeps what it deletes in its file), and a
// key that the ledger bound before the upgrade still finds its transaction when its client retries,
// so that the retry charges nothing again. Keys that checkout and billing derive are left alone.
func TestUpgradeToIdempotencyPerCredential(t *testing.T) {
	for name, open := range unmigrated() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := open(t)
			if err := db.MigrateTo(ctx, beforeIdempotencyPerCredential); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			var creds auth.Credentials
			err := db.Write(ctx, func(tx *store.Tx) error {
				m, err := merchant.Create(ctx, tx, merchant.New{Name: "Old Shop", Email: "old-shop@example.com"}, now)
				if err != nil {
					return err
				}
				creds, err = auth.CreateClient(ctx, tx, m.ID, auth.DefaultValidity, now)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			// A sale made with Idempotency-Key order-1 just before the upgrade, a billing charge and a
			// payment intent's confirmation; the sale's record and a purged record with API keys in them.
			for _, row := range [][]any{
				{"OLDSALE0000000000001", creds.ClientID, "order-1"},
				{"OLDBILL0000000000001", nil, "sub-AAAA-c1-a1"},
				{"OLDCONF0000000000001", "key_0123456789", "pi_AAAA attempt 1"},
			} {
				mustExec(t, db, `INSERT INTO transactions (transaction_id, merchant_id, kind, status, amount, currency, scale,
					card_type, card_prefix, card_suffix, source, message, processor_ref, client_id, idempotency_key, created_at, updated_at)
					VALUES ($1, $2, 'SALE', 'APPROVED', 1000, 'CAD', 2, 'VISA', '424242', '4242', 'E_COMMERCE', 'Approved', 'sim_1', $3, $4, $5, $5)`,
					row[0], creds.MerchantID, row[1], row[2], now.UnixMilli())
			}
			const kept, purged = "kk_KEPTSECRETKEPTSECRETKEPTSEC", "kk_PURGEDSECRETPURGEDSECRETPUR"
			hash := sha256.Sum256([]byte(`{"card_number":"` + cardtest.Visa + `","cvv2":"123"}`))
			for _, secret := range []string{kept, purged} {
				mustExec(t, db, `INSERT INTO idempotency_keys (merchant_id, idem_key, request_hash, status, body, locked_until, expires_at)
					VALUES ($1, $2, $3, 200, $4, 0, $5)`, creds.MerchantID, secret[3:10], hash[:], []byte(`{"key":"`+secret+`"}`),
					now.Add(time.Hour).UnixMilli())
			}
			mustExec(t, db, `DELETE FROM idempotency_keys WHERE idem_key = $1`, purged[3:10])

			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			storetest.NotStored(t, storetest.RawData(t, db), map[string]string{"an API key of a record": kept,
				"an API key of a purged record": purged, "a plain hash of a request with a card": string(hash[:])})
			for id, want := range map[string]string{"OLDSALE0000000000001": "client:" + creds.ClientID + "/order-1",
				"OLDBILL0000000000001": "sub-AAAA-c1-a1", "OLDCONF0000000000001": "pi_AAAA attempt 1"} {
				var key string
				if err := db.Reader().QueryRowContext(ctx, `SELECT idempotency_key FROM transactions WHERE transaction_id = $1`, id).Scan(&key); err != nil {
					t.Fatal(err)
				}
				if key != want {
					t.Errorf("%s: ledger key %q after the upgrade, want %q", id, key, want)
				}
			}

			// The client retries its sale after the upgrade: it gets the sale made before.
			srv := servertest.Start(t, db, server.Config{})
			tok, err := (&clientcredentials.Config{ClientID: creds.ClientID, ClientSecret: creds.ClientSecret, TokenURL: srv.URL + "/oauth/token"}).Token(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r := srv.Do(t, "POST", "/transaction-service/sale", map[string]any{"amount": "10.00", "currency": "CAD", "card_number": cardtest.Visa,
				"card_expiry_month": "12", "card_expiry_year": "40", "cvv2": "123"}, "Authorization", "Bearer "+tok.AccessToken, "Idempotency-Key", "order-1")
			if r.Status != 200 || r.Str("transaction_id") != "OLDSALE0000000000001" {
				t.Fatalf("the retry of a sale made before the upgrade: %d %s", r.Status, r.Raw)
			}
		})
	}
}

// unmigrated opens, per backend, an empty database that no migration has touched, for tests of an
// upgrade from an earlier schema (MigrateTo).
func unmigrated() map[string]func(t *testing.T) *store.DB {
	return map[string]func(t *testing.T) *store.DB{
		"sqlite": func(t *testing.T) *store.DB {
			db, err := store.Open(context.Background(), store.Config{DataDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		"postgres": func(t *testing.T) *store.DB {
			db := storetest.Postgres(t)
			mustExec(t, db, "DROP SCHEMA public CASCADE")
			mustExec(t, db, "CREATE SCHEMA public")
			return db
		},
	}
}
