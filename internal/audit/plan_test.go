package audit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A transaction's audit trail (issue 17, point 2) is read by the index on transaction_id, not by a scan
// of the log, which grows by a record with every payment: EXPLAIN (QUERY PLAN) on 20,000 records,
// analyzed.
func TestTrailUsesIndex(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.Exec(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
			INSERT INTO audit_log (merchant_id, client_id, operation, transaction_id, amount, currency, outcome, created_at)
			SELECT CASE WHEN i % 7 = 0 THEN 'm2' ELSE 'm1' END, 'client-1', 'sale', 'TX' || CAST(100000000 + i AS TEXT), i, 'CAD',
				'APPROVED', CAST(1700000000000 AS BIGINT) + i FROM n`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		explain := "EXPLAIN "
		if db.Dialect() == store.SQLite {
			explain = "EXPLAIN QUERY PLAN "
		}
		rows, err := db.Reader().QueryContext(ctx, explain+audit.TrailStatement(2), "m1", "TX100000017", "TX100000018")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var plan []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, strings.TrimSpace(string(toBytes(vals[len(vals)-1]))))
		}
		p := strings.Join(plan, "\n")
		if !strings.Contains(p, "audit_log_transaction") || strings.Contains(p, "Seq Scan") || strings.Contains(p, "SCAN audit_log\n") ||
			strings.HasSuffix(p, "SCAN audit_log") {
			t.Fatalf("the trail's plan:\n%s", p)
		}
		// And it reads them back.
		var got []audit.Entry
		if err := db.Read(ctx, func(q store.Querier) error {
			got, err = audit.Trail(ctx, q, "m1", []string{"TX100000017", "TX100000018", "TX100000014"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].TransactionID != "TX100000017" || got[1].TransactionID != "TX100000018" {
			t.Fatalf("the trail of two of m1's transactions and one of m2's: %+v", got)
		}
	})
}

func toBytes(v any) []byte {
	switch x := v.(type) {
	case string:
		return []byte(x)
	case []byte:
		return x
	}
	return nil
}
