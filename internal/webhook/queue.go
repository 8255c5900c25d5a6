package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kassapay/kassa/internal/store"
)

// The queue: event.Record (event.FanOutSQL) writes an entry of webhook_queue — an endpoint and an
// event — for each endpoint subscribed to the event, in the transaction of the change; the endpoint's
// runner makes the entries deliveries, a batch at a time, as it sends them. A sale thus writes one
// entry of one B-tree for its webhook, not a delivery row with its indexes, and the rest of the
// delivery's writing is done in batches, at the pace the deliveries are sent: while the node is busy
// with payments, BusyRate a second (migration 00049), so that the webhooks of the sales take little
// of the database the sales need.

// queuedSQL tells whether events are queued for endpoint $1.
const queuedSQL = `SELECT 1 FROM webhook_queue WHERE endpoint_id = $1 LIMIT 1`

// dequeueSQL takes the oldest events queued for endpoint $1 out of the queue, $2 + 1 of them at most,
// and returns their row ids: those up to the ($2 + 1)th, a range of the key, so that a backlog of any
// size is read no further than that. One statement, so that on PostgreSQL an entry committed
// meanwhile is either taken and returned or left — its snapshot holds it or not — and never deleted
// without being made a delivery.
const dequeueSQL = `DELETE FROM webhook_queue WHERE endpoint_id = $1 AND event_id <= COALESCE(
		(SELECT event_id FROM webhook_queue WHERE endpoint_id = $1 ORDER BY event_id LIMIT 1 OFFSET $2), 9223372036854775807)
	RETURNING event_id`

// deliverSQL makes deliveries to endpoint $1 of the events whose row ids are $2 (by dialect: a JSON
// array for SQLite, an array for PostgreSQL), each due at its event's time, written at $3.
var deliverSQL = map[store.Dialect]string{
	store.SQLite:   fmt.Sprintf(deliverSQLFormat, `(SELECT value FROM json_each($2))`),
	store.Postgres: fmt.Sprintf(deliverSQLFormat, `(SELECT unnest($2::BIGINT[]))`),
}

const deliverSQLFormat = `INSERT INTO webhook_deliveries (endpoint_id, event_id, merchant_id, next_attempt, created_at, updated_at)
	SELECT $1, e.id, e.merchant_id, e.created_at, e.created_at, $3 FROM events e WHERE e.id IN %s`

// promote makes up to n of the events queued for endpoint deliveries, in one transaction, and returns
// how many it made. With nothing queued it writes nothing.
func (d *Deliverer) promote(ctx context.Context, endpoint int64, n int) (int, error) {
	queued := false
	if err := d.cfg.DB.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, queuedSQL, endpoint)
		if err != nil {
			return err
		}
		defer rows.Close()
		queued = rows.Next()
		return rows.Err()
	}); err != nil || !queued {
		return 0, err
	}
	var ids []int64
	err := d.cfg.DB.Write(ctx, func(tx *store.Tx) error {
		ids = ids[:0]
		rows, err := tx.QueryContext(ctx, dequeueSQL, endpoint, n-1)
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, deliverSQL[tx.Dialect()], endpoint, idList(tx.Dialect(), ids), d.cfg.Now().UnixMilli())
		return err
	})
	return len(ids), err
}

// idList is ids as a statement's parameter in dialect: a JSON array for SQLite (read with json_each),
// an array for PostgreSQL.
func idList(dialect store.Dialect, ids []int64) any {
	if dialect == store.SQLite {
		b, _ := json.Marshal(ids)
		return string(b)
	}
	return ids
}
