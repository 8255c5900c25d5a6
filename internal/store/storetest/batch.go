package storetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// OneBatch runs calls, each on a goroutine of its own, so that the statements they queue for
// PostgreSQL's group commit (DB.Exec, DB.QueryRow, or code that makes one such write) are sent as one
// batch, and returns each call's error. Each call must queue exactly one statement before any other
// write of the batcher.
//
// Both of the batcher's senders are first held, each by a statement that waits for a row lock a
// transaction of OneBatch's holds; the calls' statements queue behind them (DB.Queued). Then arm runs
// (nil for nothing: a test arms a cut of its proxy there) and one sender is let go: it takes the whole
// queue at once. The other sender stays held until t's cleanup, so that a write the test makes after
// OneBatch returns is sent by the one that sent the batch.
func OneBatch(t testing.TB, db *store.DB, arm func(), calls ...func() error) []error {
	t.Helper()
	ctx := context.Background()
	raw := db.Raw()
	if _, err := raw.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS storetest_holds (name TEXT PRIMARY KEY);
		INSERT INTO storetest_holds (name) VALUES ('kept'), ('let go') ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	hold := func(name string) (*sql.Tx, chan error) {
		tx, err := raw.BeginTx(ctx, nil)
		if err == nil {
			// The lock is held for as long as the test needs, not the store's bound of an idle transaction.
			_, err = tx.ExecContext(ctx, `SET LOCAL idle_in_transaction_session_timeout = 0`)
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, `SELECT name FROM storetest_holds WHERE name = $1 FOR UPDATE`, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() }) // a sender held at t's end would hold up closing db
		done := make(chan error, 1)
		go func() {
			_, err := db.Exec(store.WithWriteBound(ctx, time.Minute), `UPDATE storetest_holds SET name = name WHERE name = $1`, name)
			done <- err
		}()
		return tx, done
	}
	waitFor := func(what string, ok func() (bool, error)) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			done, err := ok()
			if err != nil {
				t.Fatal(err)
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("OneBatch: still waiting for %s", what)
			}
		}
	}
	waiting := func(n int) func() (bool, error) {
		return func() (bool, error) {
			var got int
			err := raw.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
				AND wait_event_type = 'Lock' AND query LIKE 'UPDATE storetest_holds%'`).Scan(&got)
			return got == n, err
		}
	}
	// One sender takes the first held statement and waits for its lock; only then is the second
	// queued, for the other sender.
	kept, keptDone := hold("kept")
	waitFor("the first sender to be held", waiting(1))
	letGo, letGoDone := hold("let go")
	waitFor("the second sender to be held", waiting(2))
	t.Cleanup(func() {
		kept.Rollback()
		if err := <-keptDone; err != nil {
			t.Errorf("OneBatch: the statement that held a sender: %v", err)
		}
	})

	errs := make([]error, len(calls))
	done := make(chan struct{}, len(calls))
	for i, call := range calls {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = call()
		}()
	}
	waitFor("the calls' statements to be queued", func() (bool, error) { return db.Queued() == len(calls), nil })
	if arm != nil {
		arm()
	}
	if err := letGo.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-letGoDone; err != nil {
		t.Fatalf("OneBatch: the statement that held a sender: %v", err)
	}
	for range calls {
		<-done
	}
	return errs
}
