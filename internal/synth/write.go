package synth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/kassapay/kassa/internal/store"
)

// table is a table the loader writes, and the columns it fills.
type table struct {
	name string
	cols []string
}

var (
	customers = &table{"customers", []string{"lookup_id", "merchant_id", "email", "first_name", "last_name", "city", "country",
		"postal_code", "created_at", "updated_at"}}
	transactions = &table{"transactions", []string{"id", "transaction_id", "merchant_id", "kind", "parent_id", "status", "amount",
		"currency", "scale", "reserved", "closed_by", "message", "decline_code", "processor_ref", "card_type", "card_prefix",
		"card_suffix", "test_mode", "source", "email", "first_name", "last_name", "order_id", "client_id", "request_id",
		"created_at", "updated_at", "parent_transaction_id", "event_seq", "finished_at"}}
)

// writer buffers rows per table and writes them in batches of batchRows: on PostgreSQL with COPY, on
// SQLite with multi-row INSERTs in one transaction per batch, through the database's raw write pool
// (no server may be writing meanwhile).
type writer struct {
	db      *store.DB
	pg      *sql.Conn // PostgreSQL: the connection COPY runs on
	buf     map[*table][][]any
	ordered []*table // tables in the order they were first written, which foreign keys need
	// cacheSize is SQLite's page cache setting before the load, restored after it.
	cacheSize int
}

func newWriter(ctx context.Context, db *store.DB) (*writer, error) {
	w := &writer{db: db, buf: map[*table][][]any{}}
	if db.Dialect() == store.Postgres {
		var err error
		if w.pg, err = db.Raw().Conn(ctx); err != nil {
			return nil, err
		}
		return w, nil
	}
	// SQLite's one write connection keeps the pages of a batch in memory until it commits, rather than
	// spilling them to the WAL as its 2 MB cache fills: the indexes' random inserts touch many pages.
	raw := db.Raw()
	if err := raw.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&w.cacheSize); err != nil {
		return nil, err
	}
	_, err := raw.ExecContext(ctx, `PRAGMA cache_size = -262144`) // KiB: 256 MiB
	return w, err
}

// close gives the connection back as it was.
func (w *writer) close() {
	if w.pg != nil {
		w.pg.Close()
		return
	}
	w.db.Raw().Exec(`PRAGMA cache_size = ` + strconv.Itoa(w.cacheSize))
}

// add buffers a row of t, and writes t's rows once there are batchRows of them.
func (w *writer) add(ctx context.Context, t *table, row []any) error {
	if _, ok := w.buf[t]; !ok {
		w.ordered = append(w.ordered, t)
	}
	w.buf[t] = append(w.buf[t], row)
	if len(w.buf[t]) < batchRows {
		return nil
	}
	return w.write(ctx, t)
}

// flush writes what is buffered.
func (w *writer) flush(ctx context.Context) error {
	for _, t := range w.ordered {
		if err := w.write(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) write(ctx context.Context, t *table) error {
	rows := w.buf[t]
	if len(rows) == 0 {
		return nil
	}
	w.buf[t] = rows[:0]
	if w.pg != nil {
		return w.pg.Raw(func(dc any) error {
			c, ok := dc.(*stdlib.Conn)
			if !ok {
				return errors.New("synth: not a pgx connection")
			}
			_, err := c.Conn().CopyFrom(ctx, pgx.Identifier{t.name}, t.cols, pgx.CopyFromRows(rows))
			return err
		})
	}
	return w.insert(ctx, t, rows)
}

// sqliteRows is how many rows one INSERT statement carries on SQLite, below its limit of 32,766
// parameters.
const sqliteRows = 500

func (w *writer) insert(ctx context.Context, t *table, rows [][]any) error {
	tx, err := w.db.Raw().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	head := "INSERT INTO " + t.name + " (" + strings.Join(t.cols, ", ") + ") VALUES "
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(t.cols)), ", ") + ")"
	var stmt *sql.Stmt
	for len(rows) > 0 {
		n := min(len(rows), sqliteRows)
		if stmt == nil || n < sqliteRows {
			if stmt != nil {
				stmt.Close()
			}
			if stmt, err = tx.PrepareContext(ctx, head+strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")); err != nil {
				return err
			}
		}
		args := make([]any, 0, n*len(t.cols))
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			stmt.Close()
			return err
		}
		rows = rows[n:]
	}
	stmt.Close()
	return tx.Commit()
}

// secondaryIndexes are the indexes of the loaded tables that no constraint owns, as statements that
// create them: the loader drops them before it writes and builds them again after, which is far
// faster than maintaining them row by row (1,000,000 random inserts into each). Whatever indexes the
// migrations define are rebuilt as defined.
func (w *writer) secondaryIndexes(ctx context.Context) (names, creates []string, err error) {
	q := `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN ('transactions', 'customers')`
	if w.pg != nil {
		q = `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename IN ('transactions', 'customers')
			AND indexname NOT IN (SELECT conname FROM pg_constraint)`
	}
	rows, err := w.db.Raw().QueryContext(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name, create string
		if err := rows.Scan(&name, &create); err != nil {
			return nil, nil, err
		}
		names, creates = append(names, name), append(creates, create)
	}
	return names, creates, rows.Err()
}

// dropIndexes drops the secondary indexes and returns the statements that build them again.
func (w *writer) dropIndexes(ctx context.Context) ([]string, error) {
	names, creates, err := w.secondaryIndexes(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, err := w.db.Raw().ExecContext(ctx, `DROP INDEX `+n); err != nil {
			return nil, err
		}
	}
	return creates, nil
}

// buildIndexes runs the statements dropIndexes returned.
func (w *writer) buildIndexes(ctx context.Context, creates []string) error {
	for _, c := range creates {
		if _, err := w.db.Raw().ExecContext(ctx, c); err != nil {
			return fmt.Errorf("synth: rebuild an index: %s: %w", c, err)
		}
	}
	return nil
}

// finish brings the ledger's id sequence past the loaded ids (PostgreSQL; SQLite's AUTOINCREMENT
// follows explicit ids by itself), has the database analyze the tables, and leaves it settled as a
// database that has been running for a while is, rather than with the load's work still owed: on
// PostgreSQL the tables vacuumed (rows written by COPY have no hint bits and no visibility map yet,
// and the millions of rows inserted since the last vacuum would start autovacuum on the ledger
// while the server that follows is measured) and a checkpoint taken (the load's dirty pages would
// be written at the next one); on SQLite the write-ahead log checkpointed and truncated (the first
// commits of the server would copy gigabytes of it into the database). On PostgreSQL it also raises
// the base of places (store.XidSQL) so that the next transaction's place is at least next, above
// every loaded row's: places there follow transaction ids, which the load's few transactions did not
// consume.
func (w *writer) finish(ctx context.Context, next int64) error {
	raw := w.db.Raw()
	settle := []string{"ANALYZE", "PRAGMA wal_checkpoint(TRUNCATE)"}
	if w.pg != nil {
		if _, err := raw.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence('transactions', 'id'), (SELECT MAX(id) FROM transactions))`); err != nil {
			return err
		}
		if _, err := raw.ExecContext(ctx, `UPDATE xid_base SET base = GREATEST(base, $1 - pg_snapshot_xmax(pg_current_snapshot())::text::bigint) WHERE id = 1`, next); err != nil {
			return fmt.Errorf("synth: raise the base of places: %w", err)
		}
		settle = []string{"VACUUM (ANALYZE)", "CHECKPOINT"}
	}
	for _, stmt := range settle {
		if _, err := raw.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("synth: %s: %w", stmt, err)
		}
	}
	return nil
}
