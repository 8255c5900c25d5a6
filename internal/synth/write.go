package synth

import (
	"context"
	"database/sql"
	"errors"
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
		"created_at", "updated_at", "parent_transaction_id"}}
	audits = &table{"audit_log", []string{"merchant_id", "client_id", "operation", "transaction_id", "amount", "currency", "outcome",
		"detail", "request_id", "created_at"}}
)

// writer buffers rows per table and writes them in batches of batchRows: on PostgreSQL with COPY, on
// SQLite with multi-row INSERTs in one transaction per batch, through the database's raw write pool
// (no server may be writing meanwhile).
type writer struct {
	db      *store.DB
	pg      *sql.Conn // PostgreSQL: the connection COPY runs on
	buf     map[*table][][]any
	ordered []*table // tables in the order they were first written, which foreign keys need
}

func newWriter(ctx context.Context, db *store.DB) (*writer, error) {
	w := &writer{db: db, buf: map[*table][][]any{}}
	if db.Dialect() == store.Postgres {
		var err error
		if w.pg, err = db.Raw().Conn(ctx); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func (w *writer) close() {
	if w.pg != nil {
		w.pg.Close()
	}
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

// finish brings the ledger's id sequence past the loaded ids (PostgreSQL; SQLite's AUTOINCREMENT
// follows explicit ids by itself) and has the database analyze the tables.
func (w *writer) finish(ctx context.Context) error {
	raw := w.db.Raw()
	if w.pg != nil {
		if _, err := raw.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence('transactions', 'id'), (SELECT MAX(id) FROM transactions))`); err != nil {
			return err
		}
	}
	_, err := raw.ExecContext(ctx, "ANALYZE")
	return err
}
