package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// nestedPanic runs f and returns the *store.NestedWriteError it panicked with, or nil.
func nestedPanic(t *testing.T, f func()) (nested *store.NestedWriteError) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			e, ok := p.(*store.NestedWriteError)
			if !ok {
				t.Fatalf("panicked with %T %v, want *store.NestedWriteError", p, p)
			}
			nested = e
		}
	}()
	f()
	return nil
}

// A write begun inside a write of the same database waits for itself on SQLite; with the check on
// (storetest turns it on) it panics instead, on both backends, and the outer write is rolled back.
func TestNestedWriteDetector(t *testing.T) {
	t.Cleanup(func() { store.ForgetNestedWrites("TestNestedWriteDetector") })
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		mustExec(t, db, "CREATE TABLE nest (name TEXT PRIMARY KEY)")
		insert := func(tx *store.Tx, name string) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO nest (name) VALUES ($1)", name)
			return err
		}
		count := func(name string) int {
			var n int
			if err := db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM nest WHERE name = $1", name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}

		inner := map[string]func(){
			"Write": func() { db.Write(ctx, func(tx *store.Tx) error { return insert(tx, "inner") }) },
			"Exec":  func() { db.Exec(ctx, "INSERT INTO nest (name) VALUES ('inner')") },
			"QueryRow": func() {
				var s string
				db.QueryRow(ctx, []any{&s}, "INSERT INTO nest (name) VALUES ('inner') RETURNING name")
			},
		}
		for call, f := range inner {
			t.Run(call+" inside Write panics", func(t *testing.T) {
				nested := nestedPanic(t, func() {
					db.Write(ctx, func(tx *store.Tx) error {
						if err := insert(tx, "outer"); err != nil {
							return err
						}
						f()
						return nil
					})
				})
				if nested == nil {
					t.Fatalf("DB.%s inside DB.Write did not panic", call)
				}
				msg := nested.Error()
				if !strings.HasPrefix(msg, "store: a write begun inside a write of the same database waits for itself on SQLite: ") ||
					!strings.Contains(msg, "DB."+call) || !strings.Contains(msg, "TestNestedWriteDetector") {
					t.Fatalf("message does not say what happened, or where:\n%s", msg)
				}
				if n := count("outer"); n != 0 {
					t.Fatalf("the outer write was committed (%d rows)", n)
				}
				if n := count("inner"); n != 0 {
					t.Fatalf("the inner write was committed (%d rows)", n)
				}
			})
		}

		t.Run("writes one after another do not fire", func(t *testing.T) {
			for _, name := range []string{"first", "second"} {
				if err := db.Write(ctx, func(tx *store.Tx) error { return insert(tx, name) }); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.Exec(ctx, "INSERT INTO nest (name) VALUES ('third')"); err != nil {
				t.Fatal(err)
			}
			if count("first")+count("second")+count("third") != 3 {
				t.Fatal("the writes after the nested ones were not committed")
			}
		})

		t.Run("a write of another database inside a write does not fire", func(t *testing.T) {
			other := storetest.SQLite(t)
			mustExec(t, other, "CREATE TABLE nest (name TEXT PRIMARY KEY)")
			err := db.Write(ctx, func(tx *store.Tx) error {
				if err := insert(tx, "here"); err != nil {
					return err
				}
				_, err := other.Exec(ctx, "INSERT INTO nest (name) VALUES ('there')")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})

		t.Run("a failing write is still only an error", func(t *testing.T) {
			boom := errors.New("boom")
			if err := db.Write(ctx, func(*store.Tx) error { return boom }); !errors.Is(err, boom) {
				t.Fatalf("got %v", err)
			}
		})
	})
}
