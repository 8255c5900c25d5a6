package vault

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// merchantRange is a plan's read of the merchant's every customer (customers_merchant on merchant_id
// alone), which a search must not make.
var merchantRange = regexp.MustCompile(`customers_merchant \(merchant_id=\?\)|Index Cond: \(merchant_id = '[^']*'::text\)`)

// With thousands of customers, each with a card, and their payments in the ledger, the dashboard's
// searches by e-mail, by card last 4 and by name read the customers they find through migration 29's
// indexes, not the merchant's every customer; and a customer's payments are read on
// transactions_customer (on SQLite and on PostgreSQL, with the tables analyzed).
func TestCustomerSearchUsesIndexes(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var m merchant.Merchant
		err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			if m, err = merchant.Create(ctx, tx, merchant.New{Name: "Many Customers", Email: "many@example.com"}, time.Now()); err != nil {
				return err
			}
			const n = 5000
			if _, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2)
				INSERT INTO customers (lookup_id, merchant_id, email, first_name, last_name, created_at, updated_at)
				SELECT 'C' || i, $1, 'Customer' || i || '@example.com', 'First' || i, 'Last' || i, 0, 0 FROM n`, m.ID, n); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO stored_cards (lookup_id, customer_id, pan, fingerprint, card_type, card_prefix,
				card_suffix, expiry_month, expiry_year, is_default, created_at, updated_at)
				SELECT 'K' || lookup_id, id, $1, $1, 'VISA', '424242', CAST(1000 + id % 9000 AS TEXT), 12, 2040, TRUE, 0, 0 FROM customers`,
				[]byte{1}); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $2)
				INSERT INTO transactions (transaction_id, merchant_id, kind, status, amount, currency, scale, source, customer_lookup_id,
				created_at, updated_at)
				SELECT 'T' || i, $1, 'SALE', 'APPROVED', 100, 'CAD', 2, 'E_COMMERCE', CASE WHEN i % 10 = 0 THEN 'C' || (i / 10) END, i, i FROM n`,
				m.ID, 4*n)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Raw().ExecContext(ctx, "ANALYZE"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name  string
			f     CustomerFilter
			index string
		}{
			{"e-mail", CustomerFilter{Email: "customer77@EXAMPLE.com"}, "customers_email"},
			{"e-mail, an older page", CustomerFilter{Email: "customer77@example.com", After: 4000}, "customers_email"},
			{"card last 4", CustomerFilter{CardSuffix: "1077"}, "stored_cards_suffix"},
			{"first or last name", CustomerFilter{Name: "LAST77"}, "customers_last_name"},
			{"first or last name", CustomerFilter{Name: "first77"}, "customers_first_name"},
			{"first and last name", CustomerFilter{Name: "First77 Last77"}, "customers_"},
		} {
			tc.f.Limit = 51
			q, args, _ := customerQuery(m.ID, tc.f)
			p := storetest.Plan(t, db, q, args...)
			if !strings.Contains(p, tc.index) || strings.Contains(p, "SCAN customers") || strings.Contains(p, "SCAN stored_cards") ||
				strings.Contains(p, "Seq Scan") || merchantRange.MatchString(p) {
				t.Errorf("the search by %s does not find its customers by %s:\n%s", tc.name, tc.index, p)
			}
			list, err := (&Service{db: db}).listCustomers(ctx, m.ID, tc.f)
			if err != nil || len(list) != 1 || list[0].LookupID != "C77" {
				t.Errorf("the search by %s found %d customers (%v)", tc.name, len(list), err)
			}
		}
		// The customer page's payments: the ledger's list filtered by customer (payment.Filter.CustomerLookupID).
		p := storetest.Plan(t, db, `SELECT t.id FROM transactions t WHERE t.merchant_id = $1 AND t.status <> 'PENDING' AND t.customer_lookup_id = $2
			ORDER BY t.id DESC LIMIT 21`, m.ID, "C77")
		if !strings.Contains(p, "transactions_customer") || strings.Contains(p, "Seq Scan") || strings.Contains(p, "SCAN t") {
			t.Errorf("a customer's payments are not read by transactions_customer:\n%s", p)
		}
	})
}
