package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// beforeSettled is the last schema in which every index of the ledger held pending attempts.
const beforeSettled = 62

// ledgerIndexes is every index of transactions on PostgreSQL, and whether it holds pending attempts.
// The lists' and filters' indexes hold settled rows only (migration 00063), so that an attempt's
// INSERT does not write them; a new index of the ledger is to be added here, held to the same choice.
var ledgerIndexes = map[string]bool{
	"transactions_pkey":               true, // every lookup by id
	"transactions_transaction_id_key": true, // unique
	"transactions_idempotency":        true, // unique; finds an interrupted attempt by its key
	"transactions_pending":            true, // recovery
	"transactions_parent":             true, // a follow-up pending closes its parent
	"transactions_merchant_seq":       true, // outcomes only: event_seq is set with the outcome
	"transactions_merchant":           false,
	"transactions_time":               false,
	"transactions_card_suffix":        false,
	"transactions_email":              false,
	"transactions_first_name":         false,
	"transactions_last_name":          false,
	"transactions_order":              false,
	"transactions_dashboard_client":   false,
	"transactions_customer":           false,
	"transactions_amount":             false,
}

// ledgerRows inserts a merchant, an approved sale and a pending one with every filter's column set,
// and returns the pending row's id and the approved one's.
func ledgerRows(t *testing.T, db *store.DB) (pending, settled int64) {
	t.Helper()
	mustExec(t, db, `INSERT INTO merchants (id, name, email, email_key, default_currency, created_at)
		VALUES ('aaaaaaaaaa', 'Shop', 'shop@example.com', 'shop@example.com', 'CAD', 1)`)
	for _, r := range []struct {
		id     int64
		status string
	}{{1, "APPROVED"}, {2, "PENDING"}} {
		mustExec(t, db, `INSERT INTO transactions (id, transaction_id, merchant_id, kind, status, amount, currency, scale, card_suffix,
			source, email, first_name, last_name, order_id, client_id, customer_lookup_id, lease_until, created_at, updated_at)
			VALUES ($1, $2, 'aaaaaaaaaa', 'SALE', $3, 1000, 'CAD', 2, '4242', 'E_COMMERCE', 'jane@example.com', 'Jane', 'Roe', 'order-1',
			'dashboard/u-1', 'cus_1', 5, 1, 1)`, r.id, strings.Repeat(string(rune('A'+r.id)), 20), r.status)
	}
	return 2, 1
}

// checkLedgerIndexes checks that transactions has the indexes of ledgerIndexes, valid, each with its
// condition, and, read in the index's pages themselves (pageinspect), that the pending row has an
// entry in those that hold pending attempts only, and the settled row in every one whose condition
// it meets.
func checkLedgerIndexes(t *testing.T, db *store.DB, pending, settled int64) {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Raw().QueryContext(ctx, `SELECT c.relname, i.indisvalid, COALESCE(pg_get_expr(i.indpred, i.indrelid), '')
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'transactions'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var name, pred string
		var valid bool
		if err := rows.Scan(&name, &valid, &pred); err != nil {
			t.Fatal(err)
		}
		seen[name] = true
		holdsPending, known := ledgerIndexes[name]
		switch {
		case !known:
			t.Errorf("index %s (WHERE %s) of transactions: not in ledgerIndexes, which says whether it holds pending attempts", name, pred)
		case !valid:
			t.Errorf("index %s is INVALID", name)
		case !holdsPending && !strings.Contains(pred, "status <> 'PENDING'::text"):
			t.Errorf("index %s holds pending attempts: WHERE %q", name, pred)
		case holdsPending && strings.Contains(pred, "status <> 'PENDING'"):
			t.Errorf("index %s holds settled rows only: WHERE %q", name, pred)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for name := range ledgerIndexes {
		if !seen[name] {
			t.Errorf("index %s of transactions is missing", name)
		}
	}
	if _, err := db.Raw().ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS pageinspect`); err != nil {
		storetest.Unavailable(t, "pageinspect: %v", err)
	}
	for name, holdsPending := range ledgerIndexes {
		if name == "transactions_merchant_seq" || name == "transactions_parent" || name == "transactions_idempotency" {
			continue // no row of the test is in them: no place, no parent, no key
		}
		// A few entries: block 1 is the index's one leaf, its root.
		var p, s bool
		if err := db.Raw().QueryRowContext(ctx, `SELECT
			EXISTS (SELECT 1 FROM bt_page_items($1, 1) WHERE htid = (SELECT ctid FROM transactions WHERE id = $2)),
			EXISTS (SELECT 1 FROM bt_page_items($1, 1) WHERE htid = (SELECT ctid FROM transactions WHERE id = $3))`,
			name, pending, settled).Scan(&p, &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p != holdsPending {
			t.Errorf("%s: an entry of the pending attempt: %v, want %v", name, p, holdsPending)
		}
		if s != (name != "transactions_pending") {
			t.Errorf("%s: an entry of the settled row: %v", name, s)
		}
	}
}

// On PostgreSQL the lists' and filters' indexes of the ledger hold no pending attempt: the attempt's
// INSERT writes none of them, only the outcome's row version does.
func TestPendingAttemptsInNoFilterIndex(t *testing.T) {
	t.Parallel()
	db := storetest.Postgres(t)
	pending, settled := ledgerRows(t, db)
	checkLedgerIndexes(t, db, pending, settled)
}

// The upgrade (migration 00063) on a ledger with rows, after a run that was interrupted: one index
// already swapped, one dropped before its successor was renamed, and one whose concurrent build
// failed and left an INVALID index under the new name. The run starts over and ends with every index
// valid, under its name, with its condition.
func TestUpgradeToSettledLedgerIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := unmigrated()["postgres"](t)
	if err := db.MigrateTo(ctx, beforeSettled); err != nil {
		t.Fatal(err)
	}
	pending, settled := ledgerRows(t, db)
	raw := func(q string) error { _, err := db.Raw().ExecContext(ctx, q); return err }
	for _, q := range []string{
		`CREATE INDEX CONCURRENTLY transactions_merchant_next ON transactions (merchant_id, id) WHERE status <> 'PENDING'`,
		`DROP INDEX CONCURRENTLY transactions_merchant`,
		`ALTER INDEX transactions_merchant_next RENAME TO transactions_merchant`,
		`CREATE INDEX CONCURRENTLY transactions_time_next ON transactions (merchant_id, created_at, id) WHERE status <> 'PENDING'`,
		`DROP INDEX CONCURRENTLY transactions_time`,
	} {
		if err := raw(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Two rows of one merchant: the unique build fails, and leaves its index behind, INVALID.
	if err := raw(`CREATE UNIQUE INDEX CONCURRENTLY transactions_email_next ON transactions (merchant_id)`); err == nil {
		t.Fatal("the unique index was built")
	}
	var valid bool
	if err := db.Raw().QueryRowContext(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'transactions_email_next'::regclass`).
		Scan(&valid); err != nil || valid {
		t.Fatalf("the failed build left a valid index, or none (%v)", err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkLedgerIndexes(t, db, pending, settled)
	var n int
	if err := db.Raw().QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_class WHERE relname LIKE 'transactions%next'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d indexes left under a new name (%v)", n, err)
	}
}
