package storetest

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/store"
)

// Plan is how db would run stmt with args, one step a line: EXPLAIN QUERY PLAN's details on SQLite
// ("SEARCH t USING INDEX …", "SCAN t"), EXPLAIN's lines on PostgreSQL ("Index Scan using …", "Seq
// Scan on …"), for tests that show a query uses its index.
func Plan(t testing.TB, db *store.DB, stmt string, args ...any) string {
	t.Helper()
	return plan(t, db.Reader(), db.Dialect(), stmt, args...)
}

// PlanAsIfLarge is Plan with PostgreSQL told to avoid reading tables whole (enable_seqscan off), as
// it would for large tables: for a test whose tables are small, which PostgreSQL rightly reads whole.
func PlanAsIfLarge(t testing.TB, db *store.DB, stmt string, args ...any) string {
	t.Helper()
	tx, err := db.Raw().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if db.Dialect() == store.Postgres {
		if _, err := tx.Exec(`SET LOCAL enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
	}
	return plan(t, tx, db.Dialect(), stmt, args...)
}

func plan(t testing.TB, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, dialect store.Dialect, stmt string, args ...any) string {
	t.Helper()
	explain := "EXPLAIN "
	if dialect == store.SQLite {
		explain = "EXPLAIN QUERY PLAN "
	}
	rows, err := q.QueryContext(context.Background(), explain+stmt, args...)
	if err != nil {
		t.Fatalf("%s%s: %v", explain, stmt, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		switch v := vals[len(vals)-1].(type) { // the detail (SQLite), the only column (PostgreSQL)
		case string:
			lines = append(lines, strings.TrimSpace(v))
		case []byte:
			lines = append(lines, strings.TrimSpace(string(v)))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// FullScan reports whether a plan from Plan reads the whole of table (by its name or alias).
func FullScan(p, table string) bool {
	for _, line := range strings.Split(p, "\n") {
		if line == "SCAN "+table || strings.HasPrefix(line, "SCAN "+table+" ") && !strings.Contains(line, "USING") ||
			strings.HasPrefix(line, "Seq Scan on "+table) || strings.Contains(line, "-> Seq Scan on "+table) || strings.Contains(line, "->  Seq Scan on "+table) {
			return true
		}
	}
	return false
}
