package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/webhook/webhooktest"
)

// The queue's statements take their index whatever the planner's statistics say. The worst case for
// them is the usual one: the last ANALYZE saw every delivery done, and a backlog has built up since —
// PostgreSQL then believed the pending deliveries' partial indexes nearly empty, looked deliveries up
// by id by scanning one and sorted the backlog to find an endpoint's next (10 ms a delivery, and 300
// deliveries a second instead of 1,500; see notDone).
func TestQueueQueriesUseTheirIndexes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		f := newFixture(t, db, Config{AllowPrivate: true})
		m := f.merchant(t, "plans@example.com")
		endpoint, _ := f.endpoint(t, m, "https://127.0.0.1:9/hooks")
		for range 4 {
			f.record(t, m, 500)
		}
		webhooktest.Promote(t, db)
		if _, err := db.Exec(ctx, `UPDATE webhook_deliveries SET status = 'SUCCEEDED'`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Raw().ExecContext(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		for range 6 {
			f.record(t, m, 500)
		}
		webhooktest.Promote(t, db)
		for range 2 {
			f.record(t, m, 500) // left queued
		}
		var id int64
		if err := db.Reader().QueryRowContext(ctx, `SELECT MAX(id) FROM webhook_deliveries`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		now, until := f.clock.Now().UnixMilli(), f.clock.Now().UnixMilli()+60_000
		byID := []string{"webhook_deliveries_pkey", "USING INTEGER PRIMARY KEY"}
		due := []string{"webhook_deliveries_endpoint_due"}
		queue := []string{"webhook_queue_pkey", "USING PRIMARY KEY"}
		events := []string{"events_pkey", "USING INTEGER PRIMARY KEY"}
		held := map[store.Dialect]any{store.SQLite: "[1,2,3]", store.Postgres: []int64{1, 2, 3}}[db.Dialect()]
		for _, c := range []struct {
			name string
			stmt string
			args []any
			want []string // each statement's plan has one of these
		}{
			{"record an attempt's outcome", `UPDATE webhook_deliveries SET status = 'SUCCEEDED' WHERE id = $1 AND ` + notDone,
				[]any{id}, byID},
			{"find an endpoint with a delivery due", dueSQL[db.Dialect()], []any{now}, due},
			{"lease endpoints with deliveries due", leaseSQL[db.Dialect()], []any{now, "node", until, 32}, due},
			{"read an endpoint's due deliveries", fetchSQL[db.Dialect()], []any{endpoint, now, fetchSize, held}, due},
			{"find an endpoint's queued events", queuedSQL, []any{endpoint}, queue},
			{"take an endpoint's queued events", dequeueSQL, []any{endpoint, fetchSize - 1}, queue},
			{"make them deliveries", deliverSQL[db.Dialect()], []any{endpoint, held, now}, events},
		} {
			checkPlan(t, db, c.name, c.stmt, c.args, c.want...)
		}
		if db.Dialect() == store.Postgres {
			args := []any{[]int64{id, id - 1}, []int32{200, 200}, []int64{3, 4}, []string{"", ""}, []int64{now, now}, []int32{1, 1}, endpoint, until, "node", []string{"", ""}, []string{"", ""}}
			plan := storetest.Plan(t, db, recordSuccessesSQL, args...)
			for _, bad := range []string{"Seq Scan on webhook_deliveries", "Sort"} {
				if strings.Contains(plan, bad) {
					t.Errorf("recording successes: %s in\n%s", bad, plan)
				}
			}
			checkPlan(t, db, "recording successes", recordSuccessesSQL, args, byID...)
		}
	})
}

// checkPlan fails t unless stmt's plan names one of indexes, and reads none of the engine's tables
// whole beside it.
func checkPlan(t *testing.T, db *store.DB, name, stmt string, args []any, indexes ...string) {
	t.Helper()
	plan := storetest.Plan(t, db, stmt, args...)
	found := false
	for _, ix := range indexes {
		found = found || strings.Contains(plan, ix)
	}
	for _, table := range []string{"webhook_deliveries", "webhook_queue", "events"} {
		found = found && !strings.Contains(plan, "Seq Scan on "+table) && !strings.Contains(plan, "SCAN "+table+"\n")
	}
	if !found {
		t.Errorf("%s: want %s in the plan:\n%s", name, fmt.Sprint(indexes), plan)
	}
}
