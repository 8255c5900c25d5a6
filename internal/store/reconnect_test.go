package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store/storetest"
)

// A write after the server dropped the connections — a restart, a failover — is taken on a fresh
// connection, not answered 503 because the batch sender's held one is gone: the sender pings a
// connection idle for longer than a second before using it.
func TestWriteAfterTheConnectionsWereDropped(t *testing.T) {
	db := storetest.Postgres(t)
	ctx := context.Background()
	write := func() error {
		_, err := db.Exec(ctx, `UPDATE readiness SET checked_at = $1 WHERE id = 1`, time.Now().UnixMilli())
		return err
	}
	// Every sender holds a connection.
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if err := write(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := db.Raw().ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	for i := range 20 {
		if err := write(); err != nil {
			t.Fatalf("write %d after the connections were dropped: %v", i, err)
		}
	}
}
