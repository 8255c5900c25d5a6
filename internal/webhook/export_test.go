package webhook

import (
	"context"
	"testing"

	"github.com/kassapay/kassa/internal/store"
)

// PromoteQueued makes every event queued for an endpoint a delivery, as the endpoint's runner does
// before it sends them, for the tests of what follows (the delivery log, the resend) that do not run
// the engine.
func PromoteQueued(t *testing.T, db *store.DB) {
	t.Helper()
	ctx := context.Background()
	var endpoints []int64
	rows, err := db.Reader().QueryContext(ctx, `SELECT DISTINCT endpoint_id FROM webhook_queue`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		endpoints = append(endpoints, id)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	d := New(Config{DB: db})
	for _, endpoint := range endpoints {
		for {
			n, err := d.promote(ctx, endpoint, fetchSize)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
	}
}
