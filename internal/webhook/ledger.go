package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// Derived events: the transaction.* events are the ledger's outcomes (package payment), written
// nowhere else. Each endpoint has a cursor (ledger_seq, ledger_id): the place, in its merchant's
// commit order, of the last outcome it has made a delivery of or passed over. The endpoint's runner
// reads the outcomes after it, in commit order and only those payment.Committed (so that none is
// passed over while one before it may still commit), makes deliveries of those of the types the
// endpoint is subscribed to — a delivery whose transaction_ref names the transaction, due at the
// outcome's time — and moves the cursor past them, all in one transaction: a crash between loses no
// event and makes none twice. On PostgreSQL the transaction locks the endpoint's row first (FOR
// UPDATE), so that two nodes never both make the deliveries of the same outcomes: the second reads
// the cursor the first moved. An endpoint starts at its merchant's head (payment.Head) when it is
// made or enabled again: it is sent the events from then on, as it was sent those recorded while it
// was enabled.

// ledgerPending is the condition, in dialect, of an endpoint w with outcomes of its merchant after its
// cursor, committed (payment.Committed): found through transactions_merchant_seq.
func ledgerPending(dialect store.Dialect) string {
	return `EXISTS (SELECT 1 FROM transactions t WHERE t.merchant_id = w.merchant_id
		AND t.event_seq >= w.ledger_seq AND (t.event_seq > w.ledger_seq OR t.id > w.ledger_id) AND ` + payment.Committed[dialect] + `)`
}

// ledgerCursorSQL reads endpoint $1's merchant, subscription and cursor, by dialect: on PostgreSQL
// locking its row until the transaction ends.
var ledgerCursorSQL = map[store.Dialect]string{
	store.SQLite:   ledgerCursor,
	store.Postgres: ledgerCursor + ` FOR UPDATE`,
}

const ledgerCursor = `SELECT merchant_id, enabled_events, ledger_seq, ledger_id FROM webhook_endpoints WHERE id = $1 AND disabled = FALSE`

// deliverDerivedSQL makes deliveries to endpoint $1 of the outcomes whose transactions' row ids are $2
// (by dialect: a JSON array for SQLite, an array for PostgreSQL), each due at its outcome's time,
// written at $3, in commit order: deliveries due at the same time are sent in the order of their ids.
var deliverDerivedSQL = map[store.Dialect]string{
	store.SQLite:   fmt.Sprintf(deliverDerivedFormat, `(SELECT value FROM json_each($2))`),
	store.Postgres: fmt.Sprintf(deliverDerivedFormat, `(SELECT unnest($2::BIGINT[]))`),
}

const deliverDerivedFormat = `INSERT INTO webhook_deliveries (endpoint_id, transaction_ref, merchant_id, next_attempt, created_at, updated_at)
	SELECT $1, t.id, t.merchant_id, t.finished_at, t.finished_at, $3 FROM transactions t WHERE t.id IN %s ORDER BY t.event_seq, t.id`

// promoteLedger makes deliveries to endpoint of up to n of its merchant's outcomes after its cursor,
// of the types it is subscribed to, and moves its cursor past the outcomes read, in one transaction;
// it returns how many deliveries it made. With no outcome after the cursor it writes nothing.
func (d *Deliverer) promoteLedger(ctx context.Context, endpoint int64, n int) (int, error) {
	pending := false
	if err := d.cfg.DB.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT 1 FROM webhook_endpoints w WHERE w.id = $1 AND `+ledgerPending(d.cfg.DB.Dialect()), endpoint)
		if err != nil {
			return err
		}
		defer rows.Close()
		pending = rows.Next()
		return rows.Err()
	}); err != nil || !pending {
		return 0, err
	}
	made := 0
	err := d.cfg.DB.Write(ctx, func(tx *store.Tx) error {
		made = 0
		var merchantID, events string
		var seq, id int64
		if err := tx.QueryRowContext(ctx, ledgerCursorSQL[tx.Dialect()], endpoint).Scan(&merchantID, &events, &seq, &id); err != nil {
			return err
		}
		outcomes, err := payment.Outcomes(ctx, tx, merchantID, seq, id, n)
		if err != nil || len(outcomes) == 0 {
			return err
		}
		var ids []int64
		for _, o := range outcomes {
			if subscribed(events, o.Type) {
				ids = append(ids, o.Row)
			}
		}
		if len(ids) > 0 {
			if _, err := tx.ExecContext(ctx, deliverDerivedSQL[tx.Dialect()], endpoint, idList(tx.Dialect(), ids), d.cfg.Now().UnixMilli()); err != nil {
				return err
			}
		}
		last := outcomes[len(outcomes)-1]
		_, err = tx.ExecContext(ctx, `UPDATE webhook_endpoints SET ledger_seq = $2, ledger_id = $3 WHERE id = $1`, endpoint, last.Seq, last.Row)
		made = len(ids)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil // the endpoint was disabled meanwhile
	}
	return made, err
}

// subscribed reports whether an endpoint whose enabled_events are events ("*" or space-separated
// types) is sent events of type typ: the condition event.Record's fan-out applies in SQL.
func subscribed(events, typ string) bool {
	if events == AllEvents {
		return true
	}
	for _, t := range strings.Fields(events) {
		if t == typ {
			return true
		}
	}
	return false
}
