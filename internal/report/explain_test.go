package report

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// load writes n ledger rows for each of merchants (in zone), spread over the 120 days before now, as
// one statement per merchant; then a roll, and ANALYZE, so that the plans are those of a real ledger.
func load(tb testing.TB, db *store.DB, merchants int, n int, zone string, now time.Time) []string {
	tb.Helper()
	ctx := context.Background()
	var ids []string
	for i := range merchants {
		var m merchant.Merchant
		if err := db.Write(ctx, func(tx *store.Tx) error {
			var err error
			if m, err = merchant.Create(ctx, tx, merchant.New{Name: fmt.Sprint("shop ", i), Email: fmt.Sprintf("shop%d@shop.example", i)}, now); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE merchants SET timezone = $2 WHERE id = $1`, m.ID, zone)
			return err
		}); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, m.ID)
		step := int64(120*24*time.Hour/time.Millisecond) / int64(n)
		if _, err := db.Exec(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
			INSERT INTO transactions (transaction_id, merchant_id, kind, status, amount, currency, scale, decline_code, test_mode, source,
				created_at, updated_at)
			SELECT $2 || '-' || i, $3,
				CASE i % 7 WHEN 0 THEN 'REFUND' WHEN 1 THEN 'AUTHORIZATION' WHEN 2 THEN 'CAPTURE' ELSE 'SALE' END,
				CASE WHEN i % 10 = 0 THEN 'DECLINED' ELSE 'APPROVED' END, 100 + i % 5000,
				CASE i % 3 WHEN 0 THEN 'USD' WHEN 1 THEN 'CAD' ELSE 'EUR' END, 2,
				CASE WHEN i % 10 = 0 THEN 'insufficient_funds' END, i % 4 = 0, 'E_COMMERCE',
				CAST($4 AS BIGINT) - CAST(i AS BIGINT) * $5, CAST($4 AS BIGINT) - CAST(i AS BIGINT) * $5
			FROM n`, n, fmt.Sprint("load", i), m.ID, now.UnixMilli(), step); err != nil {
			tb.Fatal(err)
		}
	}
	if err := NewRoller(RollerConfig{DB: db, Settle: time.Millisecond}).CatchUp(ctx); err != nil {
		tb.Fatal(err)
	}
	if _, err := db.Exec(ctx, `ANALYZE`); err != nil {
		tb.Fatal(err)
	}
	return ids
}

// fullScan finds, in a plan, a read of a whole table the overview reads: on SQLite a SCAN of it (by
// name or alias), on PostgreSQL a Seq Scan. PostgreSQL reads overview_held, a handful of pending
// transactions, whole, as it should.
var fullScan = map[store.Dialect]*regexp.Regexp{
	store.SQLite:   regexp.MustCompile(`\bSCAN (transactions|t|h|overview_buckets|overview_days|overview_held|subscriptions|outbox)\b`),
	store.Postgres: regexp.MustCompile(`Seq Scan on (transactions|overview_buckets|overview_days|subscriptions|outbox)\b`),
}

// The overview's statements read through indexes, as EXPLAIN shows,
// on a ledger of ten merchants of 5,000 rows each over 120 days: the rollup's days by their key from
// the merchant, its zone and the first day (and its quarter hours from the first day, when the
// merchant's zone is not the days' — the overview in Toronto of a merchant in UTC), the ledger's rows not rolled yet by (merchant_id, id) from the roller's
// watermark, the held ones by the merchant, and billing by the subscriptions' and the outbox's
// merchant indexes. No statement reads a whole table.
func TestOverviewUsesIndexes(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		now := time.Now()
		ids := load(t, db, 10, 5000, "UTC", now)
		for _, zone := range []string{"UTC", "America/Toronto"} {
			loc, err := time.LoadLocation(zone)
			if err != nil {
				t.Fatal(err)
			}
			query, args, _ := statement(Query{MerchantID: ids[3], Location: loc, Now: now}, 0)
			plan := storetest.Plan(t, db, query, args...)
			if m := fullScan[db.Dialect()].FindString(plan); m != "" {
				t.Errorf("the overview in %s reads a whole table (%s):\n%s", zone, m, plan)
			}
			for _, index := range map[store.Dialect][]string{
				store.SQLite: {regexp.QuoteMeta("transactions_merchant (merchant_id=? AND id>?)"), "overview_held_merchant",
					regexp.QuoteMeta("sqlite_autoindex_overview_buckets_1 (merchant_id=? AND bucket>? AND bucket<?)")},
				// The ledger's rows above the watermark, by (merchant_id, id) or by id alone: either way
				// the read starts at the watermark.
				store.Postgres: {`Index Cond: \(.*id > \$\d\)`, "overview_days_pkey"},
			}[db.Dialect()] {
				if !regexp.MustCompile(index).MatchString(plan) {
					t.Errorf("the overview in %s does not use %s:\n%s", zone, index, plan)
				}
			}
		}
		// The merchant's outbox as it grows: thousands of e-mails sent, a few waiting. Its unsent ones
		// are counted through the index of the unsent, not the e-mails page's index of them all.
		if _, err := db.Exec(context.Background(), `INSERT INTO outbox (merchant_id, to_addr, subject, text_body, html_body, next_attempt, sent_at, created_at)
			WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
			SELECT $1, 'a@example.com', '', '', '', i, CASE WHEN i % 4000 = 0 THEN NULL ELSE i END, i FROM n`, ids[3]); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(context.Background(), "ANALYZE"); err != nil {
			t.Fatal(err)
		}
		// The test's subscriptions are empty, which PostgreSQL rightly reads whole; planned as if
		// they were large, they are read through their merchant indexes.
		plan := storetest.PlanAsIfLarge(t, db, billingSQL, ids[3], now.UnixMilli())
		if m := fullScan[db.Dialect()].FindString(plan); m != "" {
			t.Errorf("billing at a glance reads a whole table (%s):\n%s", m, plan)
		}
		// Subscriptions by status are read through either merchant index that begins with the status
		// (this migration's, with next_run, or the subscriptions list's, with id).
		for _, index := range []string{"subscriptions_merchant_(due|status)", "outbox_unsent_merchant"} {
			if !regexp.MustCompile(index).MatchString(plan) {
				t.Errorf("billing at a glance does not use %s:\n%s", index, plan)
			}
		}
	})
}

// The roller's read of what a roll adds reads through indexes on an analyzed ledger with nothing
// held: the range of ids above the watermark, and the held transactions by id (SQLite once read the
// whole ledger for them at every roll).
func TestRollReadsThroughIndexes(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		load(t, db, 10, 5000, "UTC", time.Now())
		plan := storetest.Plan(t, db, rollSQL, 49000, 50000)
		if m := fullScan[db.Dialect()].FindString(plan); m != "" {
			t.Errorf("a roll reads a whole table (%s):\n%s", m, plan)
		}
	})
}

// BenchmarkOverview measures the overview of one of two merchants with 200,000 ledger rows each over
// 120 days, rolled up: the statement and the page's figures (the harness of make bench measures the
// page at 1,000,000 rows).
func BenchmarkOverview(b *testing.B) {
	for _, backend := range []struct {
		name string
		open func(testing.TB) *store.DB
	}{{"sqlite", storetest.SQLite}, {"postgres", storetest.Postgres}} {
		b.Run(backend.name, func(b *testing.B) {
			db := backend.open(b)
			now := time.Now()
			ids := load(b, db, 2, 200_000, "America/Toronto", now)
			loc, _ := time.LoadLocation("America/Toronto")
			q := Query{MerchantID: ids[0], Location: loc, Now: now}
			b.ResetTimer()
			for b.Loop() {
				if _, err := Load(context.Background(), db, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
