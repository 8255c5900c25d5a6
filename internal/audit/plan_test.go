package audit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A transaction's audit trail is read by the index on transaction_id, not by a scan
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
		p := storetest.Plan(t, db, audit.TrailStatement(2), "m1", "TX100000017", "TX100000018")
		if !strings.Contains(p, "audit_log_transaction") || storetest.FullScan(p, "audit_log") {
			t.Fatalf("the trail's plan:\n%s", p)
		}
		// And it reads them back.
		var got []audit.Entry
		if err := db.Read(ctx, func(q store.Querier) error {
			var err error
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

// The activity page's filter by staff user reads audit_log_user, which holds only the records that
// name a user (migration 00052): on 20,000 records of which one in fifty names one, analyzed, the
// plan uses the index and does not scan the log, and the filter returns that user's records only.
func TestUserFilterUsesItsIndex(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.Exec(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
			INSERT INTO audit_log (merchant_id, client_id, operation, transaction_id, amount, currency, outcome, user_id, created_at)
			SELECT 'm1', 'client-1', 'sale', 'TX' || CAST(100000000 + i AS TEXT), i, 'CAD', 'APPROVED',
				CASE WHEN i % 50 = 0 THEN 'u' || CAST(i % 200 AS TEXT) END, CAST(1700000000000 AS BIGINT) + i FROM n`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		f := audit.Filter{UserID: "u50", Limit: 10}
		stmt, args := audit.ListStatement("m1", f)
		p := storetest.PlanAsIfLarge(t, db, stmt, args...)
		if !strings.Contains(p, "audit_log_user") || storetest.FullScan(p, "audit_log") {
			t.Fatalf("the user filter's plan:\n%s", p)
		}
		var got []audit.Entry
		if err := db.Read(ctx, func(q store.Querier) error {
			var err error
			got, err = audit.List(ctx, q, "m1", f)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// i % 200 = 50 and i % 50 = 0: i = 250, 450, …, 19,850 — 100 records, the newest 10 asked.
		if len(got) != 10 || got[0].TransactionID != "TX100019850" || got[9].TransactionID != "TX100018050" {
			t.Fatalf("u50's newest 10: %d records, %+v", len(got), got)
		}
		for _, e := range got {
			if e.UserID != "u50" {
				t.Fatalf("a record of %q among u50's", e.UserID)
			}
		}
	})
}

// The history's audit side (List) reads an index that begins with the merchant for each filter: the
// log's own (audit_log_merchant) unfiltered, audit_log_operation for one operation, on a page past
// the first too. On 20,000 records of two merchants, analyzed, none is planned as a scan of the log.
func TestListFiltersUseTheirIndexes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.Exec(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
			INSERT INTO audit_log (merchant_id, operation, resource, outcome, created_at)
			SELECT CASE WHEN i % 7 = 0 THEN 'm2' ELSE 'm1' END, CASE WHEN i % 97 = 0 THEN 'client.create' ELSE 'card.add' END,
				'customer/c' || CAST(i AS TEXT), 'DONE', CAST(1700000000000 AS BIGINT) + i FROM n`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			f     audit.Filter
			index []string // one of these, by backend; a first page may read the key backwards
		}{
			{audit.Filter{}, []string{"audit_log_merchant", "audit_log_pkey"}},
			{audit.Filter{Before: 15000}, []string{"audit_log_merchant", "audit_log_pkey", "USING INTEGER PRIMARY KEY"}},
			{audit.Filter{Operation: "client.create"}, []string{"audit_log_operation"}},
			{audit.Filter{Operation: "client.create", Before: 15000}, []string{"audit_log_operation"}},
		} {
			stmt, args := audit.ListStatement("m1", tc.f)
			p := storetest.PlanAsIfLarge(t, db, stmt, args...)
			used := false
			for _, ix := range tc.index {
				used = used || strings.Contains(p, ix)
			}
			if !used || storetest.FullScan(p, "audit_log") {
				t.Errorf("%+v: the plan does not use %v:\n%s", tc.f, tc.index, p)
			}
		}
	})
}
