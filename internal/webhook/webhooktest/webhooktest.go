// Package webhooktest helps the tests of what follows a webhook delivery's creation (the delivery
// log, the resend, the dashboard's pages) that do not run the delivery engine.
package webhooktest

import (
	"context"
	"testing"

	"github.com/kassapay/kassa/internal/store"
)

// Promote makes every event queued for an endpoint (webhook_queue) a delivery due at its event's
// time, as the endpoint's runner does before it sends them (internal/webhook, queue.go).
func Promote(t testing.TB, db *store.DB) {
	t.Helper()
	err := db.Write(context.Background(), func(tx *store.Tx) error {
		if _, err := tx.ExecContext(context.Background(), `INSERT INTO webhook_deliveries (endpoint_id, event_id, merchant_id, next_attempt, created_at, updated_at)
			SELECT q.endpoint_id, e.id, e.merchant_id, e.created_at, e.created_at, e.created_at
			FROM webhook_queue q JOIN events e ON e.id = q.event_id ORDER BY e.id`); err != nil {
			return err
		}
		_, err := tx.ExecContext(context.Background(), `DELETE FROM webhook_queue`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
