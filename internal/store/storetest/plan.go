package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/store"
)

// Plan is how db would run stmt with args, one step a line: EXPLAIN QUERY PLAN's details on SQLite
// ("SEARCH t USING INDEX …", "SCAN t"), EXPLAIN's lines on PostgreSQL ("Index Scan using …", "Seq
// Scan on …"), for tests that show a query uses its index.
func Plan(t testing.TB, db *store.DB, stmt string, args ...any) string {
	t.Helper()
	explain := "EXPLAIN "
	if db.Dialect() == store.SQLite {
		explain = "EXPLAIN QUERY PLAN "
	}
	rows, err := db.Reader().QueryContext(context.Background(), explain+stmt, args...)
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
