package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// testBounds are short bounds, so that a test of a hung server takes seconds.
var testBounds = store.Bounds{ConnectTimeout: time.Second, TCPTimeout: 3 * time.Second,
	WriteTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second}

// A server that hangs with its sockets open — a primary whose processes are stopped — answers no
// write, transaction, batched statement or read: each fails within its bound with
// ErrStorageUnavailable instead of waiting for ever, held connections included, and readiness (Ping)
// fails within the bound too. Once the server answers again, writes work on fresh connections with no
// restart, and Health counts the outage and the reconnect.
func TestHungServerIsBounded(t *testing.T) {
	p, url := storetest.Proxied(t)
	ctx := context.Background()
	db, err := store.Open(ctx, store.Config{DatabaseURL: url, Bounds: testBounds})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func() error {
		_, err := db.Exec(ctx, `UPDATE readiness SET checked_at = $1 WHERE id = 1`, time.Now().UnixMilli())
		return err
	}
	write := func() error {
		return db.Write(ctx, func(tx *store.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE readiness SET checked_at = $1 WHERE id = 1`, time.Now().UnixMilli())
			return err
		})
	}
	read := func() error {
		return db.Read(ctx, func(q store.Querier) error {
			var n int
			return q.QueryRowContext(ctx, `SELECT count(*) FROM readiness`).Scan(&n)
		})
	}
	// Connections are open and held (the batcher's among them) when the server hangs.
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := errors.Join(exec(), write(), read()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if h := db.Health(); !h.Available || h.Reconnects != 0 || h.Opened == 0 {
		t.Fatalf("health before the hang: %+v", h)
	}
	p.Hang()
	for name, f := range map[string]func() error{"exec": exec, "write": write, "read": read, "ping": func() error { return db.Ping(ctx) }} {
		wg.Go(func() {
			for range 3 {
				start := time.Now()
				err := f()
				if took := time.Since(start); took > 2*testBounds.WriteTimeout+time.Second {
					t.Errorf("%s took %v on a hung server; bound %v", name, took, testBounds.WriteTimeout)
				}
				if err == nil {
					t.Errorf("%s succeeded on a hung server", name)
				} else if name != "ping" && !errors.Is(err, store.ErrStorageUnavailable) {
					t.Errorf("%s on a hung server: %v, want ErrStorageUnavailable", name, err)
				}
			}
		})
	}
	wg.Wait()
	if h := db.Health(); h.Available || h.Unavailable <= 0 {
		t.Errorf("health during the hang: %+v", h)
	}
	p.Forward()
	p.Reset() // the hung connections' sockets, which a dead primary's would be, are gone
	deadline := time.Now().Add(3 * testBounds.WriteTimeout)
	for {
		err := errors.Join(exec(), write(), read(), db.Ping(ctx))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database answers again, but Kassa does not: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if h := db.Health(); !h.Available || h.Reconnects != 1 || h.Unavailable <= 0 {
		t.Errorf("health after the outage: %+v, want available, 1 reconnect and the outage's time", h)
	}
}

// A connection opened before an outage began is not used after it, however well it answers then: its
// server may be a primary that froze and came back before Patroni demoted it, serving data from
// before the failover. The outage here is the server hanging, then answering again on the same
// sockets; the server's process id of each session tells the connections apart.
func TestNoConnectionFromBeforeAnOutage(t *testing.T) {
	p, url := storetest.Proxied(t)
	ctx := context.Background()
	db, err := store.Open(ctx, store.Config{DatabaseURL: url, Bounds: testBounds})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// sessions are the server processes of 8 reads at once, and of the batcher's statement.
	sessions := func() (map[int]bool, error) {
		var mu sync.Mutex
		pids := map[int]bool{}
		var wg sync.WaitGroup
		var errs []error
		for range 8 {
			wg.Go(func() {
				var pid int
				err := db.Read(ctx, func(q store.Querier) error {
					return q.QueryRowContext(ctx, `SELECT pg_backend_pid() FROM pg_sleep(0.05)`).Scan(&pid)
				})
				mu.Lock()
				pids[pid], errs = true, append(errs, err)
				mu.Unlock()
			})
		}
		wg.Wait()
		var pid int
		errs = append(errs, db.QueryRow(ctx, []any{&pid}, `SELECT pg_backend_pid()`))
		pids[pid] = true
		return pids, errors.Join(errs...)
	}
	before, err := sessions()
	if err != nil || len(before) < 2 {
		t.Fatalf("sessions before the outage: %v, %v", before, err)
	}
	p.Hang()
	if _, err := db.Exec(ctx, `UPDATE readiness SET checked_at = $1 WHERE id = 1`, time.Now().UnixMilli()); !errors.Is(err, store.ErrStorageUnavailable) {
		t.Fatalf("a write on a hung server: %v, want ErrStorageUnavailable", err)
	}
	p.Forward()
	time.Sleep(1100 * time.Millisecond) // idle long enough for the ping that would pass them again
	for deadline := time.Now().Add(3 * testBounds.WriteTimeout); ; time.Sleep(100 * time.Millisecond) {
		after, err := sessions()
		if err == nil {
			for pid := range after {
				if before[pid] {
					t.Fatalf("session %d, opened before the outage, used after it (before %v, after %v)", pid, before, after)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database answers again, but Kassa does not: %v", err)
		}
	}
}

// A write given its own bound (WithWriteBound) outlasts the default bound where a write without one is
// cut at it: background work whose transactions are long by design is not cut at the payment path's
// bound. A statement that takes longer than the default bound stands for the long transaction.
func TestWriteBoundOfItsOwn(t *testing.T) {
	_, url := storetest.Proxied(t)
	ctx := context.Background()
	db, err := store.Open(ctx, store.Config{DatabaseURL: url, Bounds: testBounds})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	long := func(ctx context.Context) error {
		return db.Write(ctx, func(tx *store.Tx) error {
			_, err := tx.ExecContext(ctx, `SELECT pg_sleep($1)`, (testBounds.WriteTimeout + time.Second).Seconds())
			return err
		})
	}
	if err := long(ctx); !errors.Is(err, store.ErrStorageUnavailable) {
		t.Fatalf("a write longer than the default bound: %v, want ErrStorageUnavailable", err)
	}
	if err := long(store.WithWriteBound(ctx, 3*testBounds.WriteTimeout)); err != nil {
		t.Fatalf("the same write with a bound of its own: %v", err)
	}
}
