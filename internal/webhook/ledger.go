package webhook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
)

// Derived events: the transaction.* events are the ledger's outcomes (package payment), and the
// payment_intent.* events the changes of payment intents (package checkout), written nowhere else.
// Each endpoint has a cursor in each source (ledger_seq, ledger_id; change_seq, change_id): the
// place, in its merchant's commit order, of the last of the source's rows it has made a delivery of
// or passed over. The endpoint's runner reads the rows after it, in commit order and only those
// committed in order (payment.Committed: so that none is passed over while one before it may still
// commit), makes deliveries of those of the types the endpoint is subscribed to — a delivery whose
// reference column (transaction_ref, change_ref) names the row, due at the event's time — and moves
// the cursor past them, all in one transaction: a crash between loses no event and makes none twice.
// On PostgreSQL the transaction locks the endpoint's row first (FOR UPDATE), so that two nodes never
// both make the deliveries of the same rows: the second reads the cursor the first moved. An endpoint
// starts at its merchant's head in each source when it is made or enabled again: it is sent the
// events from then on, as it was sent those recorded while it was enabled.

// derivedSource is a source of derived events, as the delivery engine reads it.
type derivedSource struct {
	source      int    // event.Ledger, event.Intent
	table, time string // the source's table and its rows' event time column
	ref         string // the column of webhook_deliveries that names the row
	seq, id     string // the endpoint's cursor columns
	// pending is the condition, in dialect, of an endpoint w with rows after its cursor, committed.
	pending func(store.Dialect) string
	// rows reads up to n of the merchant's rows after the place (seq, id), committed, in commit order.
	rows func(ctx context.Context, tx *store.Tx, merchantID string, seq, id int64, n int) ([]event.Row, error)
	// events reads the events of the rows whose ids are given, by id.
	events func(ctx context.Context, q store.Querier, ids []int64) (map[int64]event.Event, error)
}

// derivedSources are the sources of derived events, in the order their rows sort at the same place.
var derivedSources = []derivedSource{
	{source: event.Ledger, table: "transactions", time: "finished_at", ref: "transaction_ref", seq: "ledger_seq", id: "ledger_id",
		pending: ledgerPending, events: payment.EventsByRow,
		rows: func(ctx context.Context, tx *store.Tx, merchantID string, seq, id int64, n int) ([]event.Row, error) {
			outcomes, err := payment.Outcomes(ctx, tx, merchantID, seq, id, n)
			rows := make([]event.Row, len(outcomes))
			for i, o := range outcomes {
				rows[i] = event.Row{ID: o.Row, Seq: o.Seq, Type: o.Type}
			}
			return rows, err
		}},
	{source: event.Intent, table: "payment_intent_changes", time: "created_at", ref: "change_ref", seq: "change_seq", id: "change_id",
		pending: checkout.ChangesPending, rows: checkout.Changes, events: checkout.EventsByRow},
}

// ledgerPending is the condition, in dialect, of an endpoint w with outcomes of its merchant after its
// cursor, committed (payment.Committed): found through transactions_merchant_seq.
func ledgerPending(dialect store.Dialect) string {
	return `EXISTS (SELECT 1 FROM transactions t WHERE t.merchant_id = w.merchant_id
		AND t.event_seq >= w.ledger_seq AND (t.event_seq > w.ledger_seq OR t.id > w.ledger_id) AND ` + payment.Committed[dialect] + `)`
}

// derivedPending is the condition, in dialect, of an endpoint w with rows of any derived source after
// its cursor, committed.
func derivedPending(dialect store.Dialect) string {
	conds := make([]string, len(derivedSources))
	for i, s := range derivedSources {
		conds[i] = s.pending(dialect)
	}
	return strings.Join(conds, " OR ")
}

// heads are the cursor columns of every derived source and, in dialect, their values at the head of
// the merchant given by the parameter merchant (event.Head, then the highest id): an endpoint with
// them is sent the events committed from the statement on, and those of the transactions under way
// during it, in every source.
func heads(dialect store.Dialect, merchant string) (columns, values []string) {
	for _, s := range derivedSources {
		columns = append(columns, s.seq, s.id)
		values = append(values, event.Head(dialect, merchant), `9223372036854775807`)
	}
	return columns, values
}

// headSQL is the SET clause, in dialect, that moves every cursor of an endpoint of the merchant given
// by the parameter merchant to its head (heads).
func headSQL(dialect store.Dialect, merchant string) string {
	columns, values := heads(dialect, merchant)
	sets := make([]string, len(columns))
	for i := range columns {
		sets[i] = columns[i] + " = " + values[i]
	}
	return strings.Join(sets, ", ")
}

// cursorSQL reads endpoint $1's merchant, subscription and cursor in the source, by dialect: on
// PostgreSQL locking its row until the transaction ends.
func (s derivedSource) cursorSQL(dialect store.Dialect) string {
	q := `SELECT merchant_id, enabled_events, ` + s.seq + `, ` + s.id + ` FROM webhook_endpoints WHERE id = $1 AND disabled = FALSE`
	if dialect == store.Postgres {
		q += ` FOR UPDATE`
	}
	return q
}

// deliverSQL makes deliveries to endpoint $1 of the rows whose ids are $2 (by dialect: a JSON array
// for SQLite, an array for PostgreSQL), each due at its event's time, written at $3, in commit order:
// deliveries due at the same time are sent in the order of their ids.
func (s derivedSource) deliverSQL(dialect store.Dialect) string {
	ids := `(SELECT value FROM json_each($2))`
	if dialect == store.Postgres {
		ids = `(SELECT unnest($2::BIGINT[]))`
	}
	return fmt.Sprintf(`INSERT INTO webhook_deliveries (endpoint_id, %s, merchant_id, next_attempt, created_at, updated_at)
	SELECT $1, t.id, t.merchant_id, t.%s, t.%s, $3 FROM %s t WHERE t.id IN %s ORDER BY t.event_seq, t.id`, s.ref, s.time, s.time, s.table, ids)
}

// promoteDerived makes deliveries to endpoint of up to n of its merchant's derived events after its
// cursors, source by source, and returns how many it made.
func (d *Deliverer) promoteDerived(ctx context.Context, endpoint int64, n int) (int, error) {
	made := 0
	for _, s := range derivedSources {
		m, err := d.promoteSource(ctx, s, endpoint, n)
		if err != nil {
			return made, err
		}
		made += m
	}
	return made, nil
}

// promoteSource makes deliveries to endpoint of up to n of its merchant's rows of s after its cursor,
// of the types it is subscribed to, and moves its cursor past the rows read, in one transaction; it
// returns how many deliveries it made. With no row after the cursor it writes nothing.
func (d *Deliverer) promoteSource(ctx context.Context, s derivedSource, endpoint int64, n int) (int, error) {
	pending := false
	if err := d.cfg.DB.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT 1 FROM webhook_endpoints w WHERE w.id = $1 AND `+s.pending(d.cfg.DB.Dialect()), endpoint)
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
		if err := tx.QueryRowContext(ctx, s.cursorSQL(tx.Dialect()), endpoint).Scan(&merchantID, &events, &seq, &id); err != nil {
			return err
		}
		read, err := s.rows(ctx, tx, merchantID, seq, id, n)
		if err != nil || len(read) == 0 {
			return err
		}
		var ids []int64
		for _, r := range read {
			if subscribed(events, r.Type) {
				ids = append(ids, r.ID)
			}
		}
		if len(ids) > 0 {
			if _, err := tx.ExecContext(ctx, s.deliverSQL(tx.Dialect()), endpoint, idList(tx.Dialect(), ids), d.cfg.Now().UnixMilli()); err != nil {
				return err
			}
		}
		last := read[len(read)-1]
		_, err = tx.ExecContext(ctx, `UPDATE webhook_endpoints SET `+s.seq+` = $2, `+s.id+` = $3 WHERE id = $1`, endpoint, last.Seq, last.ID)
		made = len(ids)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil // the endpoint was disabled meanwhile
	}
	return made, err
}

// derivedRef is the row a delivery of a derived event names: its source and row id; zero for a
// delivery of a row of events.
type derivedRef struct {
	source int
	id     int64
}

// derivedRefColumns are the reference columns of a delivery d, one per derived source, in order.
func derivedRefColumns() string {
	cols := make([]string, len(derivedSources))
	for i, s := range derivedSources {
		cols[i] = `COALESCE(d.` + s.ref + `, 0)`
	}
	return strings.Join(cols, ", ")
}

// scanRefs is what a scan of derivedRefColumns reads into (newScanRefs); ref reads the delivery's
// reference.
type scanRefs []int64

func newScanRefs() scanRefs { return make(scanRefs, len(derivedSources)) }

// dest are the scan's destinations.
func (r scanRefs) dest() []any {
	out := make([]any, len(r))
	for i := range r {
		out[i] = &r[i]
	}
	return out
}

func (r scanRefs) ref() derivedRef {
	for i, s := range derivedSources {
		if r[i] != 0 {
			return derivedRef{source: s.source, id: r[i]}
		}
	}
	return derivedRef{}
}

// derivedEvents reads the events of the rows refs name, by reference.
func derivedEvents(ctx context.Context, q store.Querier, refs []derivedRef) (map[derivedRef]event.Event, error) {
	out := map[derivedRef]event.Event{}
	for _, s := range derivedSources {
		var ids []int64
		for _, r := range refs {
			if r.source == s.source {
				ids = append(ids, r.id)
			}
		}
		if len(ids) == 0 {
			continue
		}
		events, err := s.events(ctx, q, ids)
		if err != nil {
			return nil, err
		}
		for id, e := range events {
			out[derivedRef{source: s.source, id: id}] = e
		}
	}
	return out, nil
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
