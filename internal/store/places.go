package store

import (
	"context"
	"fmt"
)

// Places in commit order on PostgreSQL. Readers in commit order (the webhook engine, the events API,
// the overview's roller) need a number for each commit that no later commit goes below, and a bound
// below which nothing can still commit. PostgreSQL's transaction ids give both: a transaction's id is
// its place, and a snapshot's xmin bounds them, every transaction with a lower id having ended. They
// are counted per cluster, though, and a dump restored into another cluster starts them low again,
// under the places stored; each is therefore added to the database's base (table xid_base), which
// Migrate raises when the database finds itself in a cluster other than the one it last set it for.
const (
	// XidSQL is the place of the statement's transaction: its id plus the base.
	XidSQL = `(pg_current_xact_id()::text::bigint + (SELECT base FROM xid_base))`
	// XminSQL is the place below which every transaction has ended, as of the statement's snapshot.
	XminSQL = `(pg_snapshot_xmin(pg_current_snapshot())::text::bigint + (SELECT base FROM xid_base))`
	// XmaxSQL is the place of the first transaction not yet begun as of the statement's snapshot.
	XmaxSQL = `(pg_snapshot_xmax(pg_current_snapshot())::text::bigint + (SELECT base FROM xid_base))`
)

// placesSQL is the highest place stored anywhere.
const placesSQL = `SELECT GREATEST(
	(SELECT COALESCE(MAX(event_seq), 0) FROM transactions),
	(SELECT COALESCE(MAX(event_seq), 0) FROM events),
	(SELECT COALESCE(MAX(event_seq), 0) FROM payment_intent_changes),
	(SELECT COALESCE(MAX(ledger_seq), 0) FROM webhook_endpoints),
	(SELECT COALESCE(MAX(change_seq), 0) FROM webhook_endpoints),
	(SELECT COALESCE(MAX(seen_xmax), 0) FROM overview_rollup))`

// rebase raises the base of the places when the database is in another cluster than the one it was
// last set for, so that the next transaction's place is above every place stored; it never lowers
// it. One transaction, the row of xid_base locked, so that nodes starting at once rebase once.
func (db *DB) rebase(ctx context.Context) error {
	if db.dialect != Postgres {
		return nil
	}
	return db.Write(ctx, func(tx *Tx) error {
		var stored, cluster string
		var base, next int64
		if err := tx.QueryRowContext(ctx, `SELECT cluster, base, (SELECT system_identifier::text FROM pg_control_system()),
			pg_snapshot_xmax(pg_current_snapshot())::text::bigint FROM xid_base WHERE id = 1 FOR UPDATE`).Scan(&stored, &base, &cluster, &next); err != nil {
			return fmt.Errorf("store: read the base of places: %w", err)
		}
		if stored == cluster {
			return nil
		}
		var top int64
		if err := tx.QueryRowContext(ctx, placesSQL).Scan(&top); err != nil {
			return fmt.Errorf("store: read the highest place: %w", err)
		}
		_, err := tx.ExecContext(ctx, `UPDATE xid_base SET cluster = $1, base = $2 WHERE id = 1`, cluster, max(base, top+1-next))
		return err
	})
}
