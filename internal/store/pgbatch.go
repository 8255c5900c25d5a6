package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Group commit on PostgreSQL.
//
// The hot path's writes are single statements that are transactions by themselves (a sale's attempt,
// then its outcome with the audit record). Sent one by one, each costs PostgreSQL a round trip, a
// commit and a wake-up: half of the machine's CPU at two thousand sales a second. DB.Exec and
// DB.QueryRow therefore queue them to one goroutine, which sends everything queued as one pgx batch:
// one round trip, run by the server as one implicit transaction, with one commit. A batch commits
// all or nothing; when it fails, nothing of it was committed, and each statement is run again on its
// own, so that one statement's failure is its own.

type stmtReq struct {
	ctx   context.Context
	query string
	args  []any
	dest  []any // QueryRow: where the returned row goes; nil for Exec
	rows  int64 // Exec: rows affected
	err   error
	done  chan struct{}
}

// pgBatcher owns one connection of the pool.
type pgBatcher struct {
	db      *DB
	conn    *sql.Conn
	mu      sync.RWMutex
	closed  bool
	queue   chan *stmtReq
	stopped chan struct{}
}

func newPGBatcher(db *DB) *pgBatcher {
	b := &pgBatcher{db: db, queue: make(chan *stmtReq, maxBatch), stopped: make(chan struct{})}
	go b.run()
	return b
}

func (b *pgBatcher) do(r *stmtReq) error {
	r.done = make(chan struct{})
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return ErrClosed
	}
	b.queue <- r
	b.mu.RUnlock()
	<-r.done
	return r.err
}

func (b *pgBatcher) close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.queue)
	}
	b.mu.Unlock()
	<-b.stopped
	if b.conn != nil {
		b.conn.Close()
	}
}

func (b *pgBatcher) run() {
	defer close(b.stopped)
	batch := make([]*stmtReq, 0, maxBatch)
	for first := range b.queue {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-b.queue:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		b.send(batch)
		for _, r := range batch {
			close(r.done)
		}
		b.db.observeBatch(len(batch))
	}
}

// send runs a batch as one implicit transaction, or each statement alone when that fails.
func (b *pgBatcher) send(batch []*stmtReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.err = r.ctx.Err(); r.err == nil {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := b.sendBatch(ctx, live)
	if err == nil {
		return
	}
	if b.conn != nil && !isStatementError(err) {
		b.conn.Close() // the connection may be broken: take another next time
		b.conn = nil
	}
	if len(live) == 1 {
		return // its own error, set by sendBatch
	}
	for _, r := range live {
		r.rows, r.err = 0, b.db.runAlone(r)
	}
}

func (b *pgBatcher) sendBatch(ctx context.Context, live []*stmtReq) error {
	if b.conn == nil {
		c, err := b.db.writer.Conn(ctx)
		if err != nil {
			for _, r := range live {
				r.err = err
			}
			return err
		}
		b.conn = c
	}
	return b.conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		var pb pgx.Batch
		for _, r := range live {
			pb.Queue(r.query, r.args...)
		}
		br := pc.SendBatch(ctx, &pb)
		for _, r := range live {
			if r.dest != nil {
				r.err = br.QueryRow().Scan(r.dest...)
			} else {
				tag, err := br.Exec()
				r.rows, r.err = tag.RowsAffected(), err
			}
		}
		err := br.Close()
		for _, r := range live {
			// A query that returns no row has its answer (sql.ErrNoRows), and the batch goes on: only
			// an error from the server fails it.
			if err == nil && !errors.Is(r.err, sql.ErrNoRows) {
				err = r.err
			}
		}
		if err != nil {
			for _, r := range live {
				if r.err == nil {
					r.err = err // rolled back with the rest of the batch
				}
			}
		}
		return err
	})
}

// isStatementError reports whether err came from the server about a statement (the connection is
// fine), rather than from the connection.
func isStatementError(err error) bool {
	var pg interface{ SQLState() string }
	return errors.As(err, &pg) || errors.Is(err, sql.ErrNoRows)
}

// runAlone runs one queued statement on its own, as a transaction of its own.
func (db *DB) runAlone(r *stmtReq) error {
	done, err := admit(r.ctx, db.gate)
	if err != nil {
		return err
	}
	defer done()
	if r.dest != nil {
		return db.writer.QueryRowContext(r.ctx, r.query, r.args...).Scan(r.dest...)
	}
	res, err := db.writer.ExecContext(r.ctx, r.query, r.args...)
	if err == nil {
		r.rows, err = res.RowsAffected()
	}
	return err
}

// rowsAffected is the sql.Result of a batched Exec.
type rowsAffected int64

func (n rowsAffected) LastInsertId() (int64, error) {
	return 0, errors.New("store: LastInsertId is not supported; use RETURNING")
}
func (n rowsAffected) RowsAffected() (int64, error) { return int64(n), nil }
