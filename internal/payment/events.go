package payment

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/store"
)

// Transaction events are derived from the ledger. A transaction's outcome — its row with event_seq
// and finished_at set, by outcomeSQL — is its event: transaction.approved, .declined, .captured,
// .refunded or .voided (eventType), created at finished_at, whose data is the transaction's Wire form.
// Nothing else is written for it: the events API reads it from here, and the webhook engine makes
// its deliveries from here, in commit order (package webhook). Outcomes recorded before the ledger
// kept its place (event_seq NULL) have rows in the events table instead, and are not derived.

// EventID is the id of the derived event of the transaction whose row id is rowID, outcome recorded
// at finishedAt (event.DerivedID).
func EventID(rowID int64, finishedAt time.Time) string {
	return event.DerivedID(event.Ledger, rowID, finishedAt)
}

// derivedColumns are a transaction's columns, then its place and its outcome's time.
const derivedColumns = columns + `, t.event_seq, t.finished_at`

// scanDerived reads a row of derivedColumns into its event.
func scanDerived(s scanner) (event.Placed, error) {
	var seq, at int64
	t, err := scanTransaction(s, &seq, &at)
	if err != nil {
		return event.Placed{}, err
	}
	e, err := DerivedEvent(t, time.UnixMilli(at))
	return event.Placed{Event: e, Key: event.Key{Seq: seq, Source: event.Ledger, ID: t.ID}}, err
}

// DerivedEvent is the event of t's outcome, recorded at finishedAt: the event that finishing t
// recorded in the events table before events were derived, with the same type, time and data (the
// Wire form, marshalled by event.New), and the id EventID.
func DerivedEvent(t Transaction, finishedAt time.Time) (event.Event, error) {
	e, err := event.New(t.MerchantID, eventType(t), t.Wire(), finishedAt)
	e.ID = EventID(t.ID, finishedAt)
	return e, err
}

// eventTypeSQL is eventType in SQL, of the transaction t.
const eventTypeSQL = `CASE WHEN t.status <> 'APPROVED' THEN '` + event.TransactionDeclined + `'
	WHEN t.kind = '` + KindCapture + `' THEN '` + event.TransactionCaptured + `'
	WHEN t.kind = '` + KindRefund + `' THEN '` + event.TransactionRefunded + `'
	WHEN t.kind = '` + KindVoid + `' THEN '` + event.TransactionVoided + `'
	ELSE '` + event.TransactionApproved + `' END`

// EventsByRow returns the derived events of the transactions whose row ids are ids, by row id; a
// transaction without an outcome with its place (event_seq) is left out.
func EventsByRow(ctx context.Context, q store.Querier, ids []int64) (map[int64]event.Event, error) {
	out := make(map[int64]event.Event, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	query, args := eventSource.ByRows(ids)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		d, err := scanDerived(rows)
		if err != nil {
			return nil, err
		}
		out[d.Key.ID] = d.Event
	}
	return out, rows.Err()
}

// GetEvent returns the merchant's derived event id with its place, or event.ErrNotFound: for a string
// that is no EventID, for another merchant's transaction, and for an id whose time is not the
// outcome's (each transaction has one event id, never two).
func GetEvent(ctx context.Context, q store.Querier, merchantID, id string) (event.Placed, error) {
	source, row, at, ok := event.ParseDerivedID(id)
	if !ok || source != event.Ledger {
		return event.Placed{}, event.ErrNotFound
	}
	d, err := scanDerived(q.QueryRowContext(ctx, `SELECT `+derivedColumns+from+`WHERE t.id = $1 AND t.merchant_id = $2
		AND t.event_seq IS NOT NULL AND t.finished_at = $3`, row, merchantID, at.UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		return event.Placed{}, event.ErrNotFound
	}
	return d, err
}

// ListEvents returns up to n of the merchant's derived events that f selects (Types, From, Until; its
// cursors and limit are the caller's), beyond bound in the merchant's order of events: older ones,
// newest first, or with newer, newer ones, oldest first. It reads the merchant's part of
// transactions_merchant_seq in order, from bound on (see TestListEventsUsesItsIndex).
func ListEvents(ctx context.Context, q store.Querier, merchantID string, f event.Filter, bound event.Key, newer bool, n int) ([]event.Placed, error) {
	query, args := listEventsQuery(merchantID, f, bound, newer, n)
	if query == "" {
		return nil, nil
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []event.Placed
	for rows.Next() {
		d, err := scanDerived(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// eventSource is how the ledger's outcomes are read as events: a derived event's place is (event_seq,
// Ledger, row id), which sorts before the other sources' of the same place.
var eventSource = event.SourceQuery{From: `transactions t`, Where: `t.event_seq IS NOT NULL`, Type: eventTypeSQL,
	Prefix: "transaction.", Time: `t.finished_at`, Columns: derivedColumns, Source: event.Ledger}

// listEventsQuery is ListEvents' query, or "" when f's types are none of a transaction's.
func listEventsQuery(merchantID string, f event.Filter, bound event.Key, newer bool, n int) (string, []any) {
	return eventSource.Query(merchantID, f, bound, newer, n)
}

// Committed is the condition, by dialect, on an outcome t that every outcome before it in its
// merchant's commit order has committed or never will, so that a reader in commit order that takes
// the outcomes it holds never passes one over. On SQLite, every outcome read: the single writer
// commits in the order of event_seq. On PostgreSQL, those below the reading statement's snapshot's
// xmin: every transaction with a lower id has ended.
var Committed = map[store.Dialect]string{
	store.SQLite:   `TRUE`,
	store.Postgres: `t.event_seq < ` + store.XminSQL,
}

// Outcome is an outcome in its merchant's commit order: its transaction's row id, its place, and
// the type of its event.
type Outcome struct {
	Row, Seq int64
	Type     string
}

// Outcomes returns up to n of the merchant's outcomes after the place (seq, id), in commit order,
// those Committed only: read through transactions_merchant_seq, from the place on.
func Outcomes(ctx context.Context, tx *store.Tx, merchantID string, seq, id int64, n int) ([]Outcome, error) {
	rows, err := tx.QueryContext(ctx, `SELECT t.id, t.event_seq, `+eventTypeSQL+` FROM transactions t
		WHERE t.merchant_id = $1 AND t.event_seq >= $2 AND (t.event_seq > $2 OR t.id > $3) AND `+Committed[tx.Dialect()]+`
		ORDER BY t.event_seq, t.id LIMIT $4`, merchantID, seq, id, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Outcome
	for rows.Next() {
		var o Outcome
		if err := rows.Scan(&o.Row, &o.Seq, &o.Type); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}
