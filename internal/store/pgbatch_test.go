package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// A batch whose connection is cut after it was sent — its COMMIT applied with the answer lost, or not
// applied — fails each of its callers' statements as in doubt, the error of a single write whose
// answer was lost (ErrStorageUnavailable, DB.InDoubt), and runs none of them again: run again, the
// applied INSERTs would fail on their own keys, and callers would take the write for failed when it
// is in the database. The next write goes through the same sender, on a new connection.
func TestLostBatchIsInDoubt(t *testing.T) {
	for _, apply := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", apply), func(t *testing.T) {
			p, url := storetest.Proxied(t)
			ctx := context.Background()
			db, err := store.Open(ctx, store.Config{DatabaseURL: url, Bounds: testBounds})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			mustExec(t, db, "CREATE TABLE items (name TEXT PRIMARY KEY, n BIGINT NOT NULL)")
			insert := func(name string) func() error {
				return func() error {
					_, err := db.Exec(ctx, "INSERT INTO items (name, n) VALUES ($1, 1)", name)
					return err
				}
			}
			var n int64
			returning := func() error {
				return db.QueryRow(ctx, []any{&n}, "INSERT INTO items (name, n) VALUES ($1, 2) RETURNING n", "returning")
			}
			errs := storetest.OneBatch(t, db, func() {
				p.CutAt(func(q string) bool { return strings.HasPrefix(q, "INSERT INTO items") }, apply)
			}, insert("exec"), returning)
			if p.Cuts() != 1 {
				t.Fatalf("%d cuts, want 1", p.Cuts())
			}
			for i, err := range errs {
				if !errors.Is(err, store.ErrStorageUnavailable) || !db.InDoubt(err) || store.IsUniqueViolation(err) {
					t.Errorf("statement %d of the cut batch: %v, want in doubt (ErrStorageUnavailable)", i, err)
				}
			}
			want := map[bool]int{true: 2, false: 0}[apply]
			if got := count(t, db, "SELECT COUNT(*) FROM items"); got != want {
				t.Errorf("%d rows after the cut batch, want %d", got, want)
			}
			// The other sender is still held: this write goes through the one whose connection was cut.
			if err := insert("after")(); err != nil {
				t.Fatalf("a write after the cut: %v", err)
			}
			if got := count(t, db, "SELECT COUNT(*) FROM items"); got != want+1 {
				t.Errorf("%d rows after the next write, want %d", got, want+1)
			}
		})
	}
}

// A batch in which one statement fails on its own (a key violated) was rolled back whole by the
// server: the statement fails alone, and the batch's other statements are run again on their own and
// succeed, once each.
func TestBatchedStatementFailsAlone(t *testing.T) {
	db := storetest.Postgres(t)
	ctx := context.Background()
	mustExec(t, db, "CREATE TABLE items (name TEXT PRIMARY KEY, n BIGINT NOT NULL)")
	mustExec(t, db, "INSERT INTO items (name, n) VALUES ('taken', 0)")
	insert := func(name string) func() error {
		return func() error {
			_, err := db.Exec(ctx, "INSERT INTO items (name, n) VALUES ($1, 1)", name)
			return err
		}
	}
	var n int64
	errs := storetest.OneBatch(t, db, nil, insert("first"), insert("taken"), func() error {
		return db.QueryRow(ctx, []any{&n}, "INSERT INTO items (name, n) VALUES ('last', 2) RETURNING n")
	})
	if errs[0] != nil || !store.IsUniqueViolation(errs[1]) || errs[2] != nil || n != 2 {
		t.Fatalf("errors %v and RETURNING %d, want the second statement's key violated alone, and 2", errs, n)
	}
	if got := count(t, db, "SELECT COUNT(*) FROM items WHERE name IN ('first', 'last') AND n > 0"); got != 2 {
		t.Errorf("%d rows of the batch's good statements, want 2", got)
	}
}

// count is the number a query that counts returns.
func count(t *testing.T, db *store.DB, query string) int {
	t.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
