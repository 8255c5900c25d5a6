package payment_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// epoch is the time of the first transaction load makes; one a minute follows.
const epoch = 1_700_000_000_000

// load inserts n transactions of the merchant in one statement, and n/10 of another merchant: a
// realistic spread of cards (9,000 last 4s), customers (5,000), order ids (half the rows), follow-ups
// (a tenth), a sales user's few (1 %), one a minute from epoch, ids in time order.
func load(t *testing.T, db *store.DB, merchantID string, n int) {
	t.Helper()
	ctx := context.Background()
	var other string
	if err := db.Write(ctx, func(tx *store.Tx) error {
		om, err := merchant.Create(ctx, tx, merchant.New{Name: "Other", Email: "other-plans@example.com"}, time.Now())
		other = om.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err := db.Exec(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
		INSERT INTO transactions (transaction_id, merchant_id, kind, parent_id, status, amount, currency, scale, card_type, card_prefix,
			card_suffix, source, email, first_name, last_name, order_id, client_id, created_at, updated_at)
		SELECT 'TX' || CAST(100000000 + i AS TEXT), CASE WHEN i % 11 = 0 THEN $3 ELSE $2 END,
			CASE WHEN i % 10 = 0 THEN 'REFUND' ELSE 'SALE' END, CASE WHEN i % 10 = 0 THEN i - 1 END,
			CASE WHEN i % 9 = 0 THEN 'DECLINED' ELSE 'APPROVED' END, i % 50000, 'CAD', 2, 'VISA',
			CASE WHEN i % 3 = 0 THEN '555555' ELSE '424242' END, CAST(1000 + i % 9000 AS TEXT), 'E_COMMERCE',
			'customer' || CAST(i % 5000 AS TEXT) || '@example.com', 'first' || CAST(i % 5000 AS TEXT), 'last' || CAST(i % 5000 AS TEXT),
			CASE WHEN i % 2 = 0 THEN 'order-' || CAST(i AS TEXT) END,
			CASE WHEN i % 100 = 0 THEN 'dashboard/u-sales' ELSE 'client-1' END, CAST($4 AS BIGINT) + i * 60000, CAST($4 AS BIGINT) + i * 60000
		FROM n`, n, merchantID, other, epoch)
	if err != nil {
		t.Fatal(err)
	}
}

// Issue 17, point 8: "Add the indexes this needs and show with EXPLAIN in a test that the list and
// filters use them." On 20,000 transactions of a merchant (and some of another), analyzed, each filter
// of the dashboard's list, the chain of a transaction and its audit trail are planned on their index,
// never as a scan of the whole table.
func TestListQueriesUseIndexes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var m merchant.Merchant
		if err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			m, err = merchant.Create(ctx, tx, merchant.New{Name: "Plans", Email: "plans@example.com"}, time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		load(t, db, m.ID, 20000)
		if _, err := db.Exec(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		old := time.UnixMilli(epoch).Add(24 * time.Hour)
		for _, tc := range []struct {
			name string
			f    payment.Filter
			// One of these, by backend. The first pages, of a merchant that has nearly every row, may
			// read the table's own key backwards (the planners' choice, as good): not a full scan either.
			index []string
		}{
			{"first page", payment.Filter{}, []string{"transactions_merchant", "transactions_pkey"}},
			{"next page", payment.Filter{After: 15000}, []string{"transactions_merchant", "USING INTEGER PRIMARY KEY (rowid<?)", "transactions_pkey"}},
			{"last 4", payment.Filter{CardSuffix: "4242"}, []string{"transactions_card_suffix"}},
			{"first 6 and last 4", payment.Filter{CardPrefix: "424242", CardSuffix: "4242"}, []string{"transactions_card_suffix"}},
			{"e-mail", payment.Filter{Email: "Customer17@Example.com"}, []string{"transactions_email"}},
			{"name", payment.Filter{Name: "first17"}, []string{"transactions_first_name"}},
			{"order id", payment.Filter{OrderID: "order-17"}, []string{"transactions_order"}},
			{"transaction id", payment.Filter{TransactionID: "TX100000017"}, []string{"transactions_transaction_id_key", "sqlite_autoindex_transactions_1"}},
			{"a day long past", payment.Filter{From: old, To: old.Add(24 * time.Hour)}, []string{"transactions_time"}},
			{"a day long past, next page", payment.Filter{From: old, To: old.Add(24 * time.Hour), After: 1500}, []string{"transactions_time"}},
			{"a sales user's own", payment.Filter{ClientID: "dashboard/u-sales"}, []string{"transactions_dashboard_client"}},
		} {
			stmt, args := payment.ListStatement(m.ID, tc.f)
			p := storetest.Plan(t, db, stmt, args...)
			used := false
			for _, ix := range tc.index {
				used = used || strings.Contains(p, ix)
			}
			if !used || storetest.FullScan(p, "transactions") || storetest.FullScan(p, "t") {
				t.Errorf("%s: the plan does not use %v:\n%s", tc.name, tc.index, p)
			}
		}
		if p := storetest.Plan(t, db, payment.ChildrenStatement(2), m.ID, 10, 20); !strings.Contains(p, "transactions_parent") || storetest.FullScan(p, "t") {
			t.Errorf("the chain: the plan does not use transactions_parent:\n%s", p)
		}
	})
}
