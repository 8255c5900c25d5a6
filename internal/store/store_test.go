package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// The conformance suite: every behaviour the domain packages rely on, on both backends.

func TestConformance(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		blob := map[store.Dialect]string{store.SQLite: "BLOB", store.Postgres: "BYTEA"}[db.Dialect()]
		mustExec(t, db, "CREATE TABLE counters (name TEXT PRIMARY KEY, n BIGINT NOT NULL, data "+blob+")")

		t.Run("migrations are applied and idempotent", func(t *testing.T) {
			if err := db.Migrate(ctx); err != nil {
				t.Fatalf("second Migrate: %v", err)
			}
			var n int
			if err := db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM merchants").Scan(&n); err != nil {
				t.Fatalf("merchants table: %v", err)
			}
			// A migration named *.postgres.sql applies to PostgreSQL alone.
			var pgOnly int
			if err := db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM goose_db_version WHERE version_id = 5").Scan(&pgOnly); err != nil {
				t.Fatal(err)
			}
			if want := map[store.Dialect]int{store.SQLite: 0, store.Postgres: 1}[db.Dialect()]; pgOnly != want {
				t.Fatalf("the PostgreSQL-only migration is applied %d times on %s", pgOnly, db.Dialect())
			}
		})

		t.Run("commit is visible to readers", func(t *testing.T) {
			mustExec(t, db, "INSERT INTO counters (name, n, data) VALUES ('a', 1, $1)", []byte{0, 1, 2})
			var n int64
			var data []byte
			if err := db.Reader().QueryRowContext(ctx, "SELECT n, data FROM counters WHERE name = $1", "a").Scan(&n, &data); err != nil {
				t.Fatal(err)
			}
			if n != 1 || string(data) != "\x00\x01\x02" {
				t.Fatalf("read back n=%d data=%x", n, data)
			}
		})

		t.Run("an error rolls the whole transaction back", func(t *testing.T) {
			boom := errors.New("boom")
			err := db.Write(ctx, func(tx *store.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO counters (name, n) VALUES ('partial', 1)"); err != nil {
					return err
				}
				return boom
			})
			if !errors.Is(err, boom) {
				t.Fatalf("Write returned %v, want boom", err)
			}
			var n int
			db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM counters WHERE name = 'partial'").Scan(&n)
			if n != 0 {
				t.Fatal("a failed transaction left a row behind")
			}
		})

		t.Run("unique violations are recognised", func(t *testing.T) {
			err := db.Write(ctx, func(tx *store.Tx) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO counters (name, n) VALUES ('a', 2)")
				return err
			})
			if !store.IsUniqueViolation(err) {
				t.Fatalf("duplicate key: IsUniqueViolation(%v) = false", err)
			}
			if store.IsUniqueViolation(errors.New("other")) {
				t.Fatal("IsUniqueViolation(other error) = true")
			}
		})

		t.Run("booleans and NULLs scan alike", func(t *testing.T) {
			var b bool
			var s sql.NullString
			if err := db.Reader().QueryRowContext(ctx, "SELECT 1 = 1, NULL").Scan(&b, &s); err != nil {
				t.Fatal(err)
			}
			if !b || s.Valid {
				t.Fatalf("got %v, %v", b, s)
			}
		})

		t.Run("concurrent conditional updates never lose or overshoot", func(t *testing.T) {
			// The ledger's pattern: UPDATE ... WHERE n + $1 <= limit. 40 writers race for 25 slots.
			mustExec(t, db, "INSERT INTO counters (name, n) VALUES ('race', 0)")
			var wg sync.WaitGroup
			var mu sync.Mutex
			won := 0
			for range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := db.Write(ctx, func(tx *store.Tx) error {
						res, err := tx.ExecContext(ctx, "UPDATE counters SET n = n + 1 WHERE name = 'race' AND n + 1 <= 25")
						if err != nil {
							return err
						}
						if k, _ := res.RowsAffected(); k == 1 {
							mu.Lock()
							won++
							mu.Unlock()
						}
						return nil
					})
					if err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			var n int
			db.Reader().QueryRowContext(ctx, "SELECT n FROM counters WHERE name = 'race'").Scan(&n)
			if n != 25 || won != 25 {
				t.Fatalf("n = %d, winners = %d; want 25 and 25", n, won)
			}
		})

		t.Run("ping", func(t *testing.T) {
			if err := db.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(db.String(), string(db.Dialect())+": ") {
				t.Fatalf("String() = %q", db.String())
			}
		})
	})
}

func TestOpenRejectsOtherSchemes(t *testing.T) {
	t.Parallel()
	_, err := store.Open(context.Background(), store.Config{DatabaseURL: "mysql://x@localhost/db"})
	if err == nil || !strings.Contains(err.Error(), "postgres://") {
		t.Fatalf("Open(mysql://) = %v", err)
	}
}

func TestPostgresURLIsRedacted(t *testing.T) {
	t.Parallel()
	_, err := store.Open(context.Background(), store.Config{DatabaseURL: "postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=1"})
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error reveals the password: %v", err)
	}
}

func TestSQLiteFileIsCreatedPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/data"
	db := storetest.SQLiteAt(t, dir)
	if db.Dialect() != store.SQLite {
		t.Fatalf("dialect %s", db.Dialect())
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode %v, want 0700", fi.Mode().Perm())
	}
}

func mustExec(t *testing.T, db *store.DB, q string, args ...any) {
	t.Helper()
	if err := db.Write(context.Background(), func(tx *store.Tx) error {
		_, err := tx.ExecContext(context.Background(), q, args...)
		return err
	}); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// Group commit: writes from many goroutines share commits, but each succeeds or fails on its own.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		mustExec(t, db, "CREATE TABLE items (name TEXT PRIMARY KEY, n BIGINT NOT NULL)")
		mustExec(t, db, "INSERT INTO items (name, n) VALUES ('taken-0', 0), ('taken-1', 0), ('taken-2', 0)")
		var wg sync.WaitGroup
		errs := make([]error, 60)
		for i := range 60 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("item-%d", i)
				switch i % 6 {
				case 0: // a single statement that violates the key
					_, errs[i] = db.Exec(ctx, "INSERT INTO items (name, n) VALUES ($1, 1)", fmt.Sprintf("taken-%d", i%3))
				case 1: // a single statement returning a row
					var n int64
					errs[i] = db.QueryRow(ctx, []any{&n}, "INSERT INTO items (name, n) VALUES ($1, $2) RETURNING n", name, int64(i))
					if errs[i] == nil && n != int64(i) {
						errs[i] = fmt.Errorf("RETURNING gave %d", n)
					}
				case 2: // a callback that writes, then fails: none of its writes may stay
					errs[i] = db.Write(ctx, func(tx *store.Tx) error {
						if _, err := tx.ExecContext(ctx, "INSERT INTO items (name, n) VALUES ($1, 2)", name); err != nil {
							return err
						}
						return errBoom
					})
				case 3: // a callback that panics
					errs[i] = db.Write(ctx, func(tx *store.Tx) error {
						tx.ExecContext(ctx, "INSERT INTO items (name, n) VALUES ($1, 3)", name)
						if db.Dialect() == store.SQLite {
							panic("callback bug")
						}
						return errBoom
					})
				case 4: // a canceled request
					cctx, cancel := context.WithCancel(ctx)
					cancel()
					_, errs[i] = db.Exec(cctx, "INSERT INTO items (name, n) VALUES ($1, 4)", name)
				default: // a plain good write
					errs[i] = db.Write(ctx, func(tx *store.Tx) error {
						_, err := tx.ExecContext(ctx, "INSERT INTO items (name, n) VALUES ($1, 5)", name)
						return err
					})
				}
			}()
		}
		wg.Wait()
		for i, err := range errs {
			var ok bool
			switch i % 6 {
			case 0:
				ok = store.IsUniqueViolation(err)
			case 2, 3:
				ok = err != nil
			case 4:
				ok = errors.Is(err, context.Canceled)
			default:
				ok = err == nil
			}
			if !ok {
				t.Errorf("write %d (kind %d): %v", i, i%6, err)
			}
		}
		var n int
		if err := db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM items WHERE name LIKE 'item-%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 20 { // kinds 1 and 5: 10 each
			t.Fatalf("%d rows written, want 20", n)
		}
	})
}

var errBoom = errors.New("boom")

// On PostgreSQL, a batched query that writes and returns no row (sql.ErrNoRows is its answer) does not
// fail the batch it shares: every statement of the batch is run once, none again on its own (which
// wrote twice, or failed a write that had been committed).
func TestBatchedQueryWithoutRow(t *testing.T) {
	db := storetest.Postgres(t)
	ctx := context.Background()
	mustExec(t, db, "CREATE TABLE items (name TEXT PRIMARY KEY, n BIGINT NOT NULL)")
	var wg sync.WaitGroup
	errs := make([]error, 80)
	for i := range 80 {
		wg.Go(func() {
			var n int64
			name := fmt.Sprintf("item-%d", i)
			if i%2 == 0 {
				errs[i] = db.QueryRow(ctx, []any{&n}, "WITH ins AS (INSERT INTO items (name, n) VALUES ($1, 1) RETURNING n) SELECT n FROM ins WHERE n < 0", name)
				if errors.Is(errs[i], sql.ErrNoRows) {
					errs[i] = nil
				} else if errs[i] == nil {
					errs[i] = errors.New("a row where there is none")
				}
				return
			}
			errs[i] = db.QueryRow(ctx, []any{&n}, "INSERT INTO items (name, n) VALUES ($1, 2) RETURNING n", name)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("statement %d: %v", i, err)
		}
	}
	var n int
	if err := db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM items").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 80 {
		t.Fatalf("%d rows, want 80", n)
	}
}

// On PostgreSQL, a batched statement that waits for a row lock does not hold up the hot path's other
// writes: while one waits for a lock another transaction holds, a second statement is sent by another
// sender and commits; the first then commits once the lock is released.
func TestLockWaitDoesNotStallOtherWrites(t *testing.T) {
	db := storetest.Postgres(t)
	ctx := context.Background()
	mustExec(t, db, "CREATE TABLE items (name TEXT PRIMARY KEY, n BIGINT NOT NULL)")
	mustExec(t, db, "INSERT INTO items (name, n) VALUES ('held', 0)")
	holder, err := db.Raw().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "UPDATE items SET n = 1 WHERE name = 'held'"); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := db.Exec(ctx, "UPDATE items SET n = 2 WHERE name = 'held'")
		blocked <- err
	}()
	// The update is sent and waits for the holder's lock.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting int
		if err := db.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM pg_locks WHERE NOT granted").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the update never waited for the lock")
		}
	}
	other := make(chan error, 1)
	go func() {
		_, err := db.Exec(ctx, "INSERT INTO items (name, n) VALUES ('other', 3)")
		other <- err
	}()
	stalled := false
	select {
	case err := <-other:
		if err != nil {
			t.Fatalf("the other write: %v", err)
		}
	case <-time.After(5 * time.Second):
		stalled = true
		t.Error("the other write waited behind the statement waiting for a lock")
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("the update, once the lock was released: %v", err)
	}
	if stalled {
		if err := <-other; err != nil {
			t.Fatalf("the other write: %v", err)
		}
	}
	var held, others int64
	if err := db.Reader().QueryRowContext(ctx, "SELECT (SELECT n FROM items WHERE name = 'held'), (SELECT COUNT(*) FROM items WHERE name = 'other')").Scan(&held, &others); err != nil {
		t.Fatal(err)
	}
	if held != 2 || others != 1 {
		t.Fatalf("held = %d, other rows %d; want 2 and 1", held, others)
	}
}
