package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
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
		if _, err := db.Exec(ctx, `UPDATE webhook_deliveries SET status = 'SUCCEEDED'`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Raw().ExecContext(ctx, `ANALYZE`); err != nil {
			t.Fatal(err)
		}
		for range 6 {
			f.record(t, m, 500)
		}
		var id int64
		if err := db.Reader().QueryRowContext(ctx, `SELECT MAX(id) FROM webhook_deliveries`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		now, until := f.clock.Now().UnixMilli(), f.clock.Now().UnixMilli()+60_000
		byID := []string{"webhook_deliveries_pkey", "USING INTEGER PRIMARY KEY"}
		next := []string{"webhook_deliveries_endpoint_due"}
		// SQLite, which plans without statistics of the pending deliveries, keeps their index by time
		// for finding the due ones (migration 00036); PostgreSQL looks endpoint by endpoint.
		due := map[store.Dialect][]string{store.SQLite: {"webhook_deliveries_due"}, store.Postgres: next}[db.Dialect()]
		for _, c := range []struct {
			name string
			stmt string
			args []any
			want []string // each statement's plan has one of these
		}{
			{"record an attempt's outcome", `UPDATE webhook_deliveries SET status = 'SUCCEEDED', lease_until = NULL WHERE id = $1 AND ` + notDone,
				[]any{id}, byID},
			{"release a lease", `UPDATE webhook_deliveries SET lease_until = NULL WHERE id = $1 AND ` + notDone, []any{id}, byID},
			{"lease an endpoint's next delivery", claimNext[db.Dialect() == store.Postgres], []any{now, until, endpoint}, next},
			{"find a due delivery", dueSQL[db.Dialect()], []any{now}, due},
			{"lease due deliveries", claimSQL[db.Dialect()], []any{now, until, 128, MaxInFlight}, due},
		} {
			checkPlan(t, db, c.name, c.stmt, c.args, c.want...)
		}
		if db.Dialect() == store.Postgres {
			plan := storetest.Plan(t, db, recordSuccessSQL, id, 200, 3, "", now, 1, until, endpoint)
			for _, bad := range []string{"Sort", "Seq Scan on webhook_deliveries"} {
				if strings.Contains(plan, bad) {
					t.Errorf("recording a success: %s in\n%s", bad, plan)
				}
			}
			checkPlan(t, db, "recording a success", recordSuccessSQL, []any{id, 200, 3, "", now, 1, until, endpoint}, byID...)
			checkPlan(t, db, "recording a success", recordSuccessSQL, []any{id, 200, 3, "", now, 1, until, endpoint}, next...)
		}
	})
}

// checkPlan fails t unless stmt's plan names one of indexes, and reads no table whole beside it.
func checkPlan(t *testing.T, db *store.DB, name, stmt string, args []any, indexes ...string) {
	t.Helper()
	plan := storetest.Plan(t, db, stmt, args...)
	found := false
	for _, ix := range indexes {
		found = found || strings.Contains(plan, ix)
	}
	if !found || strings.Contains(plan, "Seq Scan on webhook_deliveries") || strings.Contains(plan, "SCAN webhook_deliveries\n") {
		t.Errorf("%s: want %s in the plan:\n%s", name, fmt.Sprint(indexes), plan)
	}
}
