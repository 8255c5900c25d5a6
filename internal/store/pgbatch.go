package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Group commit on PostgreSQL.
//
// The hot path's writes are single statements that are transactions by themselves (a sale's attempt,
// then its outcome with the audit record). Sent one by one, each costs PostgreSQL a round trip, a
// commit and a wake-up: half of the machine's CPU at two thousand sales a second. DB.Exec and
// DB.QueryRow therefore queue them, and a sender takes everything queued and sends it as one pgx batch:
// one round trip, run by the server as one implicit transaction, with one commit. A batch commits
// all or nothing. When one of its statements fails on its own (the server's error about it: a key
// violated, a serialization failure), the server rolled the batch back, nothing of it was committed,
// and each statement is run again on its own, so that one statement's failure is its own. When the
// batch fails on its connection (cut, reset, no answer in time, the server shutting down), its answer
// is lost and the server may have committed it: each of its statements fails as a single write whose
// answer was lost does, with ErrStorageUnavailable (in doubt, DB.InDoubt), and none is run again, so
// that nothing is applied twice and each caller settles its own write as it would a single one.
//
// pgSenders send batches at once, each on a connection of its own. PostgreSQL runs a connection's
// statements in one process: with one sender, that process was the busiest of the machine (56–85 %
// of a core with 2,000 sales in flight) while the other core was partly idle, and a statement that
// waited for a row lock held every hot-path write behind it. Two let PostgreSQL use two cores, and one
// stalled statement leave the other sender going; the commits of the two meet in PostgreSQL's own
// group commit of the WAL. A batch's statements are independent callers' (each waits for its own),
// so no order is lost between them.
const pgSenders = 2

type stmtReq struct {
	ctx   context.Context // bounded by Bounds.WriteTimeout (DB.Exec, DB.QueryRow)
	state atomic.Int32    // queued, taken by a sender, or abandoned by its caller
	query string
	args  []any
	dest  []any // QueryRow: where the returned row goes; nil for Exec
	rows  int64 // Exec: rows affected
	err   error
	done  chan struct{}
}

// The states of a stmtReq: a caller whose context ends while its statement is still queued (both
// senders stuck on a database that does not answer) abandons it and returns at once; one that a
// sender has taken waits for the sender's answer, which may scan into the caller's variables.
const (
	queued int32 = iota
	taken
	abandoned
)

// pgBatcher sends the queue's statements through pgSenders, each owning one connection of the pool.
type pgBatcher struct {
	db      *DB
	mu      sync.RWMutex
	closed  bool
	queue   chan *stmtReq
	senders sync.WaitGroup
}

// pgSender sends batches on a connection of its own.
type pgSender struct {
	db    *DB
	conn  *sql.Conn
	taken time.Time // when conn was taken from the pool
	used  time.Time // when conn last answered
}

// idleCheck is how long the sender's connection may sit idle before the next batch pings it first.
// The connection is held, so database/sql never checks it as it does a pooled one before reuse: one
// that the server dropped meanwhile (a restart, a failover) would fail the next batch, a 503 for
// writes that a fresh connection takes. The same bound as pgx's own check of pooled connections; under
// load the connection is never idle that long, and the ping costs nothing.
const idleCheck = time.Second

func newPGBatcher(db *DB) *pgBatcher {
	b := &pgBatcher{db: db, queue: make(chan *stmtReq, maxBatch)}
	for range pgSenders {
		b.senders.Add(1)
		go func() {
			defer b.senders.Done()
			s := &pgSender{db: db}
			s.run(b.queue)
			if s.conn != nil {
				s.conn.Close()
			}
		}()
	}
	return b
}

func (b *pgBatcher) do(r *stmtReq) error {
	r.done = make(chan struct{})
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return ErrClosed
	}
	select {
	case b.queue <- r:
	case <-r.ctx.Done():
		b.mu.RUnlock()
		return r.ctx.Err()
	}
	b.mu.RUnlock()
	select {
	case <-r.done:
		return r.err
	case <-r.ctx.Done():
		if r.state.CompareAndSwap(queued, abandoned) {
			return r.ctx.Err()
		}
		<-r.done // the sender has it: its answer is on its way, within the batch's bound
		return r.err
	}
}

// Queued is how many single statements (Exec, QueryRow) wait for a sender of PostgreSQL's group
// commit, none taken yet; 0 on SQLite. For a look at the queue, and for tests that arrange a batch.
func (db *DB) Queued() int {
	if db.pgBatch == nil {
		return 0
	}
	return len(db.pgBatch.queue)
}

func (b *pgBatcher) close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.queue)
	}
	b.mu.Unlock()
	b.senders.Wait()
}

// run sends the queue's statements in batches until the queue is closed.
func (s *pgSender) run(queue chan *stmtReq) {
	batch := make([]*stmtReq, 0, maxBatch)
	for first := range queue {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-queue:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		n := 0
		for _, r := range batch {
			if r.state.CompareAndSwap(queued, taken) {
				batch[n] = r
				n++
			}
		}
		batch = batch[:n]
		s.send(batch)
		for _, r := range batch {
			close(r.done)
		}
		s.db.observeBatch(len(batch))
	}
}

// send runs a batch as one implicit transaction; when one of its statements failed on its own, each
// statement alone; when its connection failed, none again, each failing in doubt (inDoubt).
func (s *pgSender) send(batch []*stmtReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.err = r.ctx.Err(); r.err == nil {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	// The batch runs until the last of its statements' bounds: each caller gave up waiting for no
	// answer by then, and a connection that has not answered is dropped.
	var last time.Time
	for _, r := range live {
		if d, ok := r.ctx.Deadline(); ok && d.After(last) {
			last = d
		}
	}
	if last.IsZero() {
		last = time.Now().Add(s.db.bounds.WriteTimeout)
	}
	ctx, cancel := context.WithDeadline(context.Background(), last)
	defer cancel()
	err := s.sendBatch(ctx, live)
	if err == nil {
		return
	}
	if !isStatementError(err) {
		if s.conn != nil {
			s.conn.Close() // the connection may be broken: take another next time
			s.conn = nil
		}
		// The batch may have been committed with its answer lost: running a statement again could
		// apply it twice, or fail it on what its first run wrote (a key it inserted).
		for _, r := range live {
			r.rows, r.err = 0, inDoubt(err)
		}
		return
	}
	if len(live) == 1 {
		return // its own error, set by sendBatch
	}
	// Rolled back whole: none of the statements was applied, and each runs again as a transaction of
	// its own, the one that failed failing alone.
	for _, r := range live {
		r.rows, r.err = 0, s.db.runAlone(r)
	}
}

func (s *pgSender) sendBatch(ctx context.Context, live []*stmtReq) error {
	// A connection taken before the latest outage began goes back to the pool, which closes it
	// (checkIdle): its server may be a primary that stopped answering and came back.
	if s.conn != nil && s.taken.UnixNano() < s.db.health.outageBegan.Load() {
		s.conn.Close()
		s.conn = nil
	}
	if s.conn != nil && time.Since(s.used) > idleCheck {
		pctx, cancel := context.WithTimeout(ctx, s.db.bounds.pingTimeout())
		err := s.conn.PingContext(pctx)
		cancel()
		if err != nil {
			s.conn.Close()
			s.conn = nil
		}
	}
	if s.conn == nil {
		c, err := s.db.writer.Conn(ctx)
		if err != nil {
			return err
		}
		s.conn, s.taken = c, time.Now()
	}
	return s.conn.Raw(func(dc any) error {
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
		s.used = time.Now()
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

// isStatementError reports whether err, a batch's error, is one of its statements' own: the server's
// error about a statement (a key violated, a serialization failure), after which the server rolled
// the batch's implicit transaction back and the connection is fine. Any other error — the connection
// cut or reset, no answer within the batch's bound, or an error of the server that says the connection
// or the server itself failed (a shutdown, a full disk, a standby: isStorageFault) — leaves the batch's
// outcome unknown.
func isStatementError(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && !isStorageFault(err)
}

// inDoubt is the error of each statement of a batch that failed with err on its connection: the
// storage error of a write whose answer was lost (ErrStorageUnavailable, which DB.InDoubt reports
// in doubt), as a single write gets, so that its caller settles it the same way.
func inDoubt(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	return &storageError{cause: err}
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
