package event

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The list and its filters search the indexes of the merchant's order of events (Key), never the whole
// table, from the cursor on: 20,000
// events of four types, of ten large merchants and a small one (m7, one event in 500), whose pages
// PostgreSQL would rightly read along the primary key if its events were everywhere.
func TestListUsesIndexes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.Exec(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
			INSERT INTO events (event_id, merchant_id, type, data, created_at, event_seq)
			SELECT 'evt_' || i, CASE WHEN i % 500 = 7 THEN 'm7' ELSE 'big' || (i % 10) END, CASE (i / 500) % 4 WHEN 0 THEN 'transaction.approved' WHEN 1 THEN 'transaction.declined'
				WHEN 2 THEN 'payment_intent.created' ELSE 'customer.created' END, '{}', 1700000000000 + i * 1000, i / 3 FROM n`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name  string
			f     Filter
			bound Key
			newer bool
			index []string // one of these
		}{
			{"first page", Filter{Limit: 10}, Key{}, false, []string{"events_merchant"}},
			{"next page", Filter{Limit: 10}, Key{5000, Table, 15000}, false, []string{"events_merchant"}},
			{"next page after a derived event", Filter{Limit: 10}, Key{5000, Ledger, 123}, false, []string{"events_merchant"}},
			{"previous page", Filter{Limit: 10}, Key{1666, Table, 5000}, true, []string{"events_merchant"}},
			{"one type", Filter{Types: []string{TransactionApproved}, Limit: 10}, Key{}, false, []string{"events_merchant_type"}},
			{"one type, next page", Filter{Types: []string{TransactionApproved}, Limit: 10}, Key{5000, Table, 15000}, false,
				[]string{"events_merchant_type"}},
			{"a prefix's types", Filter{Types: []string{TransactionApproved, TransactionDeclined}, Limit: 10}, Key{}, false,
				[]string{"events_merchant_type", "events_merchant"}},
			{"a day", Filter{From: time.UnixMilli(1700005000000), Until: time.UnixMilli(1700005000000).Add(24 * time.Hour), Limit: 10}, Key{}, false,
				[]string{"events_merchant"}},
		} {
			stmt, args := listQuery("m7", tc.f, tc.bound, tc.newer, tc.f.Limit+1)
			p := storetest.Plan(t, db, stmt, args...)
			used := false
			for _, ix := range tc.index {
				used = used || strings.Contains(p, ix)
			}
			if !used || storetest.FullScan(p, "events") {
				t.Errorf("%s: the plan does not use %v:\n%s", tc.name, tc.index, p)
			}
		}
	})
}

// An event written in a transaction that rolls back is not recorded, nor are its deliveries: no event
// without its change.
func TestRolledBackEventIsNotRecorded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		endpoint(t, db, "m1")
		boom := errors.New("the change failed")
		err := db.Write(ctx, func(tx *store.Tx) error {
			if err := Record(ctx, tx, "m1", TransactionApproved, map[string]string{"id": "t1"}, time.Now()); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("write: %v", err)
		}
		if n := rows(t, db, "events") + rows(t, db, "webhook_queue") + rows(t, db, "webhook_deliveries"); n != 0 {
			t.Fatalf("%d rows of events, queue and deliveries after the rollback", n)
		}
	})
}

// Purge deletes the events past Retention, in batches, with their deliveries and attempts; a younger
// event stays with its own.
func TestPurgeDeletesOldEventsWithTheirDeliveries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		endpoint(t, db, "m1")
		now := time.UnixMilli(1_800_000_000_000)
		old, young := now.Add(-Retention-time.Minute), now.Add(-Retention+time.Minute)
		for i := range purgeBatch + 5 { // more than one batch
			at := old
			if i%100 == 0 {
				at = young
			}
			if err := db.Write(ctx, func(tx *store.Tx) error {
				return Record(ctx, tx, "m1", TransactionApproved, map[string]int{"n": i}, at)
			}); err != nil {
				t.Fatal(err)
			}
		}
		// The entries of every other hundred events are made deliveries with an attempt, as the endpoint's
		// runner would (internal/webhook); the others stay queued.
		for _, stmt := range []string{
			`INSERT INTO webhook_deliveries (endpoint_id, event_id, merchant_id, next_attempt, created_at, updated_at)
				SELECT q.endpoint_id, e.id, e.merchant_id, e.created_at, e.created_at, e.created_at
				FROM webhook_queue q JOIN events e ON e.id = q.event_id WHERE (e.id / 100) % 2 = 0`,
			`DELETE FROM webhook_queue WHERE (event_id / 100) % 2 = 0`,
			`INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, created_at) SELECT id, 500, 10, 0 FROM webhook_deliveries`,
		} {
			if _, err := db.Exec(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		n, err := Purge(ctx, db, now)
		if want := purgeBatch + 5 - 11; err != nil || n != want {
			t.Fatalf("purged %d, %v; want %d", n, err, want)
		}
		var delivered int // of the young events
		if err := db.Reader().QueryRowContext(ctx, `SELECT COUNT(*) FROM events WHERE (id / 100) % 2 = 0`).Scan(&delivered); err != nil {
			t.Fatal(err)
		}
		if delivered == 0 || delivered == 11 {
			t.Fatalf("%d of the 11 young events delivered: the test wants both kinds", delivered)
		}
		for table, want := range map[string]int{"events": 11, "webhook_deliveries": delivered, "webhook_attempts": delivered, "webhook_queue": 11 - delivered} {
			if got := rows(t, db, table); got != want {
				t.Errorf("%s: %d rows left, want %d, those of the young events", table, got, want)
			}
		}
	})
}

// endpoint adds an endpoint of the merchant subscribed to every event.
func endpoint(t *testing.T, db *store.DB, merchantID string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `INSERT INTO webhook_endpoints (endpoint_id, merchant_id, url, enabled_events, secret, created_at, updated_at)
		VALUES ($1, $2, 'https://example.com/', '*', $3, 0, 0)`, "we_"+merchantID, merchantID, []byte{1}); err != nil {
		t.Fatal(err)
	}
}

// rows counts a table's rows.
func rows(t *testing.T, db *store.DB, table string) int {
	t.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
