package payment_test

import (
	"context"
	"database/sql"
	"fmt"
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

// loadedMerchant creates a merchant and loads 20,000 of its transactions (load).
func loadedMerchant(t *testing.T, db *store.DB, name, email string) merchant.Merchant {
	t.Helper()
	ctx := context.Background()
	var m merchant.Merchant
	if err := db.Write(ctx, func(tx *store.Tx) error {
		var err error
		m, err = merchant.Create(ctx, tx, merchant.New{Name: name, Email: email}, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	load(t, db, m.ID, 20000)
	return m
}

// The dashboard's list and filters use their indexes, as EXPLAIN shows. On 20,000 transactions of a
// merchant (and some of another), analyzed, each filter
// of the dashboard's list, the chain of a transaction and its audit trail are planned on their index,
// never as a scan of the whole table.
func TestListQueriesUseIndexes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		m := loadedMerchant(t, db, "Plans", "plans@example.com")
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
			// PostgreSQL once read the time index backwards, through the whole history, for an
			// e-mail's few rows in a date range; they are found by the e-mail and sorted.
			{"e-mail in a date range", payment.Filter{Email: "customer17@example.com", From: old, To: old.AddDate(0, 0, 30)}, []string{"transactions_email"}},
			{"order id in a date range", payment.Filter{OrderID: "order-17", From: old, To: old.AddDate(0, 0, 30)}, []string{"transactions_order"}},
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
		// The dashboard's count of a list: a day long past by the time index, an amount range by the
		// amount's.
		for _, tc := range []struct {
			f     payment.Filter
			index string
		}{
			{payment.Filter{From: old, To: old.Add(24 * time.Hour)}, "transactions_time"},
			{payment.Filter{MinAmount: new(int64(1_000_000)), MaxAmount: new(int64(1_100_000))}, "transactions_amount"},
		} {
			stmt, args := payment.CountStatement(m.ID, tc.f, 1000)
			if p := storetest.Plan(t, db, stmt, args...); !strings.Contains(p, tc.index) || storetest.FullScan(p, "t") {
				t.Errorf("count %+v: the plan does not use %s:\n%s", tc.f, tc.index, p)
			}
		}
		// PostgreSQL plans a statement prepared once (pgx prepares each) for its values five times, then
		// may keep a generic plan, which cannot see them: a selective filter's index is still its choice.
		if db.Dialect() == store.Postgres {
			for _, f := range []payment.Filter{{Email: "customer17@example.com", From: old, To: old.AddDate(0, 0, 30)},
				{CardSuffix: "4242", From: old, To: old.AddDate(0, 0, 1)}} {
				stmt, args := payment.ListStatement(m.ID, f)
				if p := genericPlan(t, db, stmt, args...); strings.Contains(p, "transactions_time") {
					t.Errorf("%+v: the generic plan reads the time index:\n%s", f, p)
				}
			}
		}
		if p := storetest.Plan(t, db, payment.ChildrenStatement(2), m.ID, 10, 20); !strings.Contains(p, "transactions_parent") || storetest.FullScan(p, "t") {
			t.Errorf("the chain: the plan does not use transactions_parent:\n%s", p)
		}
	})
}

// A search for one amount, or a range of a few units, reads the amount's index (migration
// 00050) and sorts what it finds; a wide range is read newest first, as the index would make it sort
// most of the ledger. List tells them apart by counting the range in the index, up to
// payment.AmountProbe, which reads the index alone.
func TestAmountFilterChoosesItsIndex(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		m := loadedMerchant(t, db, "Amounts", "amounts@example.com") // amounts i % 50000 cents: each amount once or not at all
		if _, err := db.Exec(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		amount := func(major int64) *int64 { v := major * 10000; return &v }
		one, few, wide := payment.Filter{MinAmount: amount(123), MaxAmount: amount(123)},
			payment.Filter{MinAmount: amount(120), MaxAmount: amount(129)}, payment.Filter{MinAmount: amount(10)}
		for _, tc := range []struct {
			name   string
			f      payment.Filter
			narrow bool
		}{{"one amount", one, true}, {"ten units", few, true}, {"wide", wide, false}} {
			narrow, err := payment.NarrowAmount(ctx, db, m.ID, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if narrow != tc.narrow {
				t.Errorf("%s: read through the amount's index: %v, want %v", tc.name, narrow, tc.narrow)
			}
		}
		for _, f := range []payment.Filter{one, few} {
			stmt, args := payment.ListStatementByAmount(m.ID, f)
			if p := storetest.Plan(t, db, stmt, args...); !strings.Contains(p, "transactions_amount") || storetest.FullScan(p, "t") {
				t.Errorf("a narrow amount range: the plan does not use transactions_amount:\n%s", p)
			}
		}
		// One amount is read from the index in order, newest first, whatever its count: no sort.
		stmt, args := payment.ListStatementByAmount(m.ID, one)
		if p := storetest.Plan(t, db, stmt, args...); strings.Contains(p, "TEMP B-TREE") || strings.Contains(p, "Sort") {
			t.Errorf("one amount is sorted:\n%s", p)
		}
		stmt, args = payment.ListStatement(m.ID, wide)
		if p := storetest.Plan(t, db, stmt, args...); strings.Contains(p, "transactions_amount") || storetest.FullScan(p, "t") ||
			!strings.Contains(p, "transactions_merchant") && !strings.Contains(p, "transactions_pkey") {
			t.Errorf("a wide amount range is not read newest first:\n%s", p)
		}
		probe := []any{m.ID, *few.MinAmount, *few.MaxAmount, payment.AmountProbe}
		if db.Dialect() == store.SQLite {
			if p := storetest.Plan(t, db, payment.AmountProbeSQL[store.SQLite], probe...); !strings.Contains(p, "COVERING INDEX transactions_amount") {
				t.Errorf("the count of an amount range does not read the index alone:\n%s", p)
			}
			return
		}
		// PostgreSQL reads an index alone where its visibility map lets it, which a table just written
		// (and not yet vacuumed) has not: told to read no table through an index, nor whole, it still
		// reads the index alone, which it could not if a column the count needs were not in it.
		tx, err := db.Raw().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec(`SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(`EXPLAIN `+payment.AmountProbeSQL[store.Postgres], probe...)
		if err != nil {
			t.Fatal(err)
		}
		if p := planText(t, rows); !strings.Contains(p, "Index Only Scan using transactions_amount") {
			t.Errorf("the count of an amount range cannot read the index alone:\n%s", p)
		}
	})
}

// genericPlan is PostgreSQL's generic plan of stmt (its plan for any values), shown with args.
func genericPlan(t *testing.T, db *store.DB, stmt string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Raw().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	values := make([]string, len(args))
	for i, a := range args {
		values[i] = fmt.Sprint(a)
		if s, ok := a.(string); ok {
			values[i] = "'" + strings.ReplaceAll(s, "'", "''") + "'"
		}
	}
	for _, q := range []string{`SET plan_cache_mode = force_generic_plan`, `PREPARE generic_plan AS ` + stmt} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	defer conn.ExecContext(ctx, `DEALLOCATE generic_plan; RESET plan_cache_mode`)
	rows, err := conn.QueryContext(ctx, `EXPLAIN EXECUTE generic_plan(`+strings.Join(values, ", ")+`)`)
	if err != nil {
		t.Fatal(err)
	}
	return planText(t, rows)
}

// planText reads an EXPLAIN's rows, one line each, and closes them.
func planText(t *testing.T, rows *sql.Rows) string {
	t.Helper()
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

// The history's ledger side (payment.Records) walks transactions_merchant_seq from the merchant's
// end, whatever the filter, and the transaction page's (payment.RecordsOf) finds its rows by
// transaction_id: on 20,000 transactions with places (the staff's and another merchant's among them),
// analyzed, neither is planned as a scan of the ledger, nor sorts it.
func TestRecordQueriesUseIndexes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		m := loadedMerchant(t, db, "Plans", "plans@example.com")
		if _, err := db.Exec(ctx, `UPDATE transactions SET event_seq = id, finished_at = created_at`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			kind   string
			before int64
		}{{"first page", "", 0}, {"next page", "", 15000}, {"refunds", payment.KindRefund, 0}, {"refunds, next page", payment.KindRefund, 15000}} {
			stmt, args := payment.RecordsStatement(m.ID, tc.kind, tc.before, 50)
			p := storetest.Plan(t, db, stmt, args...)
			if !strings.Contains(p, "transactions_merchant_seq") || storetest.FullScan(p, "t") || strings.Contains(p, "TEMP B-TREE") ||
				strings.Contains(p, "Sort") {
				t.Errorf("%s: the plan does not walk transactions_merchant_seq:\n%s", tc.name, p)
			}
		}
		p := storetest.Plan(t, db, payment.RecordsOfStatement(2), m.ID, "TX100000017", "TX100000018")
		if !strings.Contains(p, "transactions_transaction_id_key") && !strings.Contains(p, "sqlite_autoindex_transactions_1") ||
			storetest.FullScan(p, "t") {
			t.Errorf("a transaction's records: the plan does not use the transaction_id key:\n%s", p)
		}
	})
}
