package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/kassapay/kassa/internal/store"
)

// A SQLite database copied from the binary's migrated one has the schema and the applied migrations
// of a database migrated from scratch, and is a database of its own: what one test writes, another
// does not see.
func TestSQLiteCopyIsAFreshMigratedDatabase(t *testing.T) {
	ctx := context.Background()
	scratch := open(t, store.Config{DataDir: t.TempDir()})
	a, b := SQLite(t), SQLite(t)
	dump := func(db *store.DB) []string {
		t.Helper()
		return Strings(t, db.Raw(), `SELECT type || ' ' || name || ': ' || COALESCE(sql, '') FROM sqlite_master
			UNION ALL SELECT 'migration ' || version_id || ' ' || is_applied FROM goose_db_version ORDER BY 1`)
	}
	want := dump(scratch)
	if len(want) < 10 {
		t.Fatalf("a database migrated from scratch has only %v", want)
	}
	if got := dump(a); !slices.Equal(got, want) {
		t.Fatalf("the copy differs from a database migrated from scratch:\n%v\nwant\n%v", got, want)
	}
	if _, err := a.Raw().ExecContext(ctx, "CREATE TABLE only_in_a (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	if got := dump(b); !slices.Equal(got, want) {
		t.Fatalf("a write to one copy shows in another:\n%v", got)
	}
}
