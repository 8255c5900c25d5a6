package event_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// An event is queued for delivery to each enabled endpoint of its merchant subscribed to its type, and
// to no other: an entry of webhook_queue each, which the endpoint's runner makes a delivery
// (internal/webhook's TestQueuedEventsBecomeDeliveries).
func TestRecordQueuesDeliveries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		at := time.UnixMilli(1_700_000_000_000)
		endpoints := []struct {
			id, merchant, events string
			disabled             bool
		}{
			{"we_all", "m1", "*", false},
			{"we_refunds", "m1", "transaction.refunded customer.created", false},
			{"we_prefix", "m1", "customer.create", false}, // a prefix of a type is not that type
			{"we_off", "m1", "*", true},
			{"we_other", "m2", "*", false},
		}
		for _, e := range endpoints {
			if _, err := db.Exec(ctx, `INSERT INTO webhook_endpoints (endpoint_id, merchant_id, url, enabled_events, disabled, secret, created_at, updated_at)
				VALUES ($1, $2, 'https://example.com/', $3, $4, $5, 0, 0)`, e.id, e.merchant, e.events, e.disabled, []byte{1}); err != nil {
				t.Fatal(err)
			}
		}
		err := db.Write(ctx, func(tx *store.Tx) error {
			return event.Record(ctx, tx, "m1", event.CustomerCreated, map[string]string{"id": "c1"}, at)
		})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.Reader().QueryContext(ctx, `SELECT w.endpoint_id, e.created_at, e.type, e.data FROM webhook_queue q
			JOIN webhook_endpoints w ON w.id = q.endpoint_id JOIN events e ON e.id = q.event_id ORDER BY w.endpoint_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var id, typ, data string
			var created int64
			if err := rows.Scan(&id, &created, &typ, &data); err != nil {
				t.Fatal(err)
			}
			if created != at.UnixMilli() || typ != event.CustomerCreated || data != `{"id":"c1"}` {
				t.Errorf("queued for %s: event of %d, type %s, data %s", id, created, typ, data)
			}
			got = append(got, id)
		}
		if len(got) != 2 || got[0] != "we_all" || got[1] != "we_refunds" {
			t.Fatalf("deliveries to %v, want [we_all we_refunds]", got)
		}
	})
}
