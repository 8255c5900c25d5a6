package store_test

import (
	"context"
	"testing"
)

// beforeRefunds is the last schema in which a captured payment intent named its authorization.
const beforeRefunds = 39

// The upgrade to v1 refunds (migration 37): a payment intent captured before it names its capture as
// latest_charge (and charge_id), the transaction that captured the money and that refunds act on;
// other intents keep theirs.
func TestUpgradeToRefunds(t *testing.T) {
	for name, open := range unmigrated() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := open(t)
			if err := db.MigrateTo(ctx, beforeRefunds); err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, `INSERT INTO merchants (id, name, email, email_key, default_currency, created_at)
				VALUES ('aaaaaaaaaa', 'Shop', 'shop@example.com', 'shop@example.com', 'CAD', 1)`)
			mustExec(t, db, `INSERT INTO transactions (id, transaction_id, merchant_id, kind, parent_id, status, amount, currency, scale, source,
				created_at, updated_at) VALUES
				(1, 'AUTHAAAAAAAAAAAAAAAA', 'aaaaaaaaaa', 'AUTHORIZATION', NULL, 'APPROVED', 9900, 'CAD', 2, 'E_COMMERCE', 1, 1),
				(2, 'DECLINEDCAPTUREAAAAA', 'aaaaaaaaaa', 'CAPTURE', 1, 'DECLINED', 4000, 'CAD', 2, 'E_COMMERCE', 2, 2),
				(3, 'CAPTUREAAAAAAAAAAAAA', 'aaaaaaaaaa', 'CAPTURE', 1, 'APPROVED', 4000, 'CAD', 2, 'E_COMMERCE', 3, 3),
				(4, 'HELDAAAAAAAAAAAAAAAA', 'aaaaaaaaaa', 'AUTHORIZATION', NULL, 'APPROVED', 500, 'CAD', 2, 'E_COMMERCE', 4, 4),
				(5, 'SALEAAAAAAAAAAAAAAAA', 'aaaaaaaaaa', 'SALE', NULL, 'APPROVED', 700, 'CAD', 2, 'E_COMMERCE', 5, 5)`)
			mustExec(t, db, `INSERT INTO payment_intents (intent_id, merchant_id, status, amount, currency, capture_method, amount_received,
				metadata, charge_id, latest_charge, created_at, updated_at) VALUES
				('pi_captured', 'aaaaaaaaaa', 'succeeded', 9900, 'CAD', 'manual', 4000, '{}', 1, 'AUTHAAAAAAAAAAAAAAAA', 1, 1),
				('pi_held', 'aaaaaaaaaa', 'requires_capture', 500, 'CAD', 'manual', 0, '{}', 4, 'HELDAAAAAAAAAAAAAAAA', 4, 4),
				('pi_sale', 'aaaaaaaaaa', 'succeeded', 700, 'CAD', 'automatic', 700, '{}', 5, 'SALEAAAAAAAAAAAAAAAA', 5, 5)`)
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			for id, want := range map[string]struct {
				charge int64
				latest string
			}{"pi_captured": {3, "CAPTUREAAAAAAAAAAAAA"}, "pi_held": {4, "HELDAAAAAAAAAAAAAAAA"}, "pi_sale": {5, "SALEAAAAAAAAAAAAAAAA"}} {
				var charge int64
				var latest string
				if err := db.Reader().QueryRowContext(ctx, `SELECT charge_id, latest_charge FROM payment_intents WHERE intent_id = $1`, id).
					Scan(&charge, &latest); err != nil || charge != want.charge || latest != want.latest {
					t.Errorf("%s after the upgrade: charge_id %d, latest_charge %s (%v); want %d, %s", id, charge, latest, err, want.charge, want.latest)
				}
			}
		})
	}
}
