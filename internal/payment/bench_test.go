package payment_test

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"

	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/payment/paymenttest"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// BenchmarkCharge measures the ledger alone: approved sales per second from 64 goroutines calling
// Ledger.Charge with what `kassa-load`'s sale scenario sends (10.00 CAD, a Visa, an e-mail), the
// simulator answering at once, on each backend with its production durability (SQLite
// synchronous=FULL; PostgreSQL on a cluster of its own with fsync and synchronous_commit on) — no
// HTTP, no JSON, no token. It is the bound the storage puts on the API's sales (beside the HTTP-stack
// ceiling, which bounds them too), and the figure to cut the ledger's writes against. The load
// benchmark's ledger scenario (kassa-load --scenarios ledger) does the same work through the same
// paymenttest.SaleLedger, and compares it with the bare HTTP handler of the same run:
//
//	go test ./internal/payment -run '^$' -bench Charge -benchtime 50000x
func BenchmarkCharge(b *testing.B) {
	const clients = 64
	for _, backend := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.DurablePostgres}} {
		b.Run(backend.name, func(b *testing.B) {
			l, c, err := paymenttest.SaleLedger(context.Background(), backend.open(b))
			if err != nil {
				b.Fatal(err)
			}
			// The test binary's check for writes inside writes (store/nested.go), which opening the
			// database turned on, reads the goroutine's stack at every write: off, as in production.
			store.CheckNestedWrites(false)
			defer store.CheckNestedWrites(true)
			ctx := context.Background()
			var next, declined atomic.Int64
			b.ResetTimer()
			servertest.Parallel(clients, func(int) {
				for next.Add(1) <= int64(b.N) {
					sale := c
					sale.RequestID = "req-" + rand.Text()
					t, err := l.Charge(ctx, sale)
					if err != nil {
						b.Error(err)
						return
					}
					if t.Status != payment.StatusApproved {
						declined.Add(1)
					}
				}
			})
			b.StopTimer()
			if n := declined.Load(); n != 0 {
				b.Fatalf("%d of %d sales not approved", n, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sales/s")
		})
	}
}

// BenchmarkSaleWrites measures what a sale writes into PostgreSQL, rather than how fast: the
// write-ahead log it adds (pg_current_wal_lsn before and after b.N sales from 8 goroutines, divided
// by b.N: "wal-B/sale") and, where the server loads pg_stat_statements, the shared buffers that the
// ledger row's two statements, the attempt's INSERT and the outcome's UPDATE, read and write per sale
// ("row-buffers/sale", hits and reads; "row-dirtied/sale"). These count the index entries a sale
// makes and vary little with the machine's load, unlike sales per second. The database is the test
// cluster's (KASSA_TEST_DATABASE_URL names another, such as one started with
// shared_preload_libraries=pg_stat_statements and full_page_writes on):
//
//	go test ./internal/payment -run '^$' -bench SaleWrites -benchtime 4000x
func BenchmarkSaleWrites(b *testing.B) {
	db := storetest.Postgres(b)
	ctx := context.Background()
	l, c, err := paymenttest.SaleLedger(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	store.CheckNestedWrites(false)
	defer store.CheckNestedWrites(true)
	raw := db.Raw()
	_, err = raw.ExecContext(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	statements := err == nil
	if statements {
		// Loaded by the server, not only created: the view answers.
		_, err = raw.ExecContext(ctx, `SELECT pg_stat_statements_reset()`)
		statements = err == nil
	}
	var start string
	if err := raw.QueryRowContext(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&start); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.ResetTimer()
	servertest.Parallel(8, func(int) {
		for next.Add(1) <= int64(b.N) {
			sale := c
			sale.RequestID = "req-" + rand.Text()
			if _, err := l.Charge(ctx, sale); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	var wal float64
	if err := raw.QueryRowContext(ctx, `SELECT pg_current_wal_lsn() - $1::pg_lsn`, start).Scan(&wal); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(wal/float64(b.N), "wal-B/sale")
	if !statements {
		return
	}
	var read, dirtied float64
	if err := raw.QueryRowContext(ctx, `SELECT COALESCE(SUM(shared_blks_hit + shared_blks_read), 0), COALESCE(SUM(shared_blks_dirtied), 0)
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND (query LIKE 'INSERT INTO transactions %' OR query LIKE 'UPDATE transactions SET status = %')`).Scan(&read, &dirtied); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(read/float64(b.N), "row-buffers/sale")
	b.ReportMetric(dirtied/float64(b.N), "row-dirtied/sale")
}
