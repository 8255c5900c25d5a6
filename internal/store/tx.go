package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Tx is a write transaction handed to a Write callback. On SQLite its statements are prepared once
// and reused (the modernc driver keeps no statement cache, and parsing was a sixth of a sale's CPU);
// PostgreSQL's driver caches prepared statements itself.
type Tx struct {
	tx    *sql.Tx
	db    *DB
	scope *scope // the write's bound (nil: none)
}

// Dialect is the dialect of the transaction's database.
func (t *Tx) Dialect() Dialect { return t.db.dialect }

// Sealer is the sealer of the transaction's database (DB.Sealer).
func (t *Tx) Sealer() (Sealer, error) { return t.db.Sealer() }

// ExecContext executes a statement in the transaction.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = t.scope.bound(ctx)
	if st := t.db.stmts.prepared(t.db.writer, query); st != nil {
		return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a query in the transaction.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = t.scope.bound(ctx)
	if st := t.db.stmts.prepared(t.db.writer, query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query that returns at most one row in the transaction.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = t.scope.bound(ctx)
	if st := t.db.stmts.prepared(t.db.writer, query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}

// reader runs read-only statements on the read pool, prepared once per connection on SQLite, within
// the bound of its Read (scope; nil for Reader, which has none).
type reader struct {
	pool  *sql.DB
	stmts *stmtCache
	scope *scope
}

func (r *reader) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = r.scope.bound(ctx)
	if st, err := r.stmts.get(ctx, r.pool, query); err == nil && st != nil {
		return st.ExecContext(ctx, args...)
	}
	return r.pool.ExecContext(ctx, query, args...)
}

func (r *reader) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = r.scope.bound(ctx)
	if st, err := r.stmts.get(ctx, r.pool, query); err == nil && st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.pool.QueryContext(ctx, query, args...)
}

func (r *reader) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = r.scope.bound(ctx)
	if st, err := r.stmts.get(ctx, r.pool, query); err == nil && st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.pool.QueryRowContext(ctx, query, args...)
}

// stmtCache keeps one prepared statement per query text and pool. A nil cache (PostgreSQL) prepares
// nothing. It stops adding statements at maxStmts, so that queries built at run time cannot grow it
// without bound; beyond that, statements are parsed each time.
//
// The writer pool has one connection, which a transaction holds while it runs: a statement missing
// from the cache cannot be prepared then. prepared runs it unprepared that time and remembers it, and
// the batcher prepares what was remembered between batches.
type stmtCache struct {
	mu     sync.RWMutex
	m      map[stmtKey]*sql.Stmt
	wanted map[string]bool // writer statements to prepare between batches
}

type stmtKey struct {
	pool  *sql.DB
	query string
}

const maxStmts = 1000

func newStmtCache() *stmtCache {
	return &stmtCache{m: map[stmtKey]*sql.Stmt{}, wanted: map[string]bool{}}
}

// prepared returns the writer's prepared statement for query, or nil (remembering it) when there is
// none yet.
func (c *stmtCache) prepared(pool *sql.DB, query string) *sql.Stmt {
	if c == nil {
		return nil
	}
	k := stmtKey{pool, query}
	c.mu.RLock()
	st, ok := c.m[k]
	full := len(c.m)+len(c.wanted) >= maxStmts
	c.mu.RUnlock()
	if ok || full {
		return st
	}
	c.mu.Lock()
	c.wanted[query] = true
	c.mu.Unlock()
	return nil
}

// prepareWanted prepares the remembered writer statements; the writer's connection must be free.
func (c *stmtCache) prepareWanted(ctx context.Context, pool *sql.DB) {
	if c == nil {
		return
	}
	c.mu.Lock()
	wanted := c.wanted
	c.wanted = map[string]bool{}
	c.mu.Unlock()
	for q := range wanted {
		st, err := pool.PrepareContext(ctx, q)
		if err != nil {
			continue // it will run unprepared, and fail there with its error if it is wrong
		}
		c.mu.Lock()
		c.m[stmtKey{pool, q}] = st
		c.mu.Unlock()
	}
}

func (c *stmtCache) get(ctx context.Context, pool *sql.DB, query string) (*sql.Stmt, error) {
	if c == nil {
		return nil, nil
	}
	k := stmtKey{pool, query}
	c.mu.RLock()
	st, ok := c.m[k]
	n := len(c.m)
	c.mu.RUnlock()
	if ok || n >= maxStmts {
		return st, nil
	}
	st, err := pool.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[k]; ok {
		st.Close()
		return prev, nil
	}
	c.m[k] = st
	return st, nil
}

func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, st := range c.m {
		st.Close()
		delete(c.m, k)
	}
}

// Group commit on SQLite.
//
// Every commit of the embedded database waits for an fsync. Writes are therefore queued to one
// goroutine, which runs everything queued in one transaction: each caller's work inside a savepoint,
// so that one caller's failure rolls back only its own work, and one COMMIT — one fsync — for all of
// them. Write returns when the commit that holds its work is durable, exactly as before; under load a
// batch holds tens of writes. A batch of one runs without a savepoint.

// maxBatch bounds the writes of one batch, and so the latency a batch adds.
const maxBatch = 256

type writeReq struct {
	ctx  context.Context
	fn   func(*Tx) error
	err  error
	done chan struct{}
}

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("store: database closed")

// batcher owns the SQLite writer connection.
type batcher struct {
	db      *DB
	mu      sync.RWMutex // held for reading while enqueuing, for writing by close
	closed  bool
	queue   chan *writeReq
	stopped chan struct{}
}

func newBatcher(db *DB) *batcher {
	b := &batcher{db: db, queue: make(chan *writeReq, maxBatch), stopped: make(chan struct{})}
	go b.run()
	return b
}

func (b *batcher) write(ctx context.Context, fn func(*Tx) error) error {
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan struct{})}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return ErrClosed
	}
	b.queue <- r
	b.mu.RUnlock()
	<-r.done // even when ctx ends: the work may be committed, and the caller must know
	if nested, ok := r.err.(*NestedWriteError); ok {
		panic(nested) // on the caller's goroutine, where the batcher's recover cannot hide it
	}
	return r.err
}

func (b *batcher) close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.queue)
	}
	b.mu.Unlock()
	<-b.stopped
}

func (b *batcher) run() {
	defer close(b.stopped)
	batch := make([]*writeReq, 0, maxBatch)
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
		b.commit(batch)
		for _, r := range batch {
			close(r.done)
		}
		b.db.observeBatch(len(batch))
		b.db.stmts.prepareWanted(context.Background(), b.db.writer)
	}
}

// commit runs a batch in one transaction.
func (b *batcher) commit(batch []*writeReq) {
	ctx := context.Background()
	sqlTx, err := b.db.writer.BeginTx(ctx, nil)
	if err != nil {
		for _, r := range batch {
			r.err = fmt.Errorf("store: begin: %w", err)
		}
		return
	}
	tx := &Tx{tx: sqlTx, db: b.db}
	single := len(batch) == 1
	ok := 0
	for _, r := range batch {
		if r.err = r.ctx.Err(); r.err != nil {
			continue
		}
		if !single {
			if _, r.err = tx.ExecContext(ctx, "SAVEPOINT w"); r.err != nil {
				continue
			}
		}
		r.err = b.call(r.fn, tx)
		switch {
		case r.err != nil && !single:
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO w"); err != nil {
				sqlTx.Rollback()
				failAll(batch, err)
				return
			}
			tx.ExecContext(ctx, "RELEASE w")
		case r.err == nil && !single:
			if _, err := tx.ExecContext(ctx, "RELEASE w"); err != nil {
				sqlTx.Rollback()
				failAll(batch, err)
				return
			}
			ok++
		case r.err == nil:
			ok++
		}
	}
	if ok == 0 {
		sqlTx.Rollback()
		return
	}
	if err := sqlTx.Commit(); err != nil {
		failAll(batch, fmt.Errorf("store: commit: %w", err))
	}
}

// failAll marks every write of the batch that had not failed on its own as failed with err.
func failAll(batch []*writeReq, err error) {
	for _, r := range batch {
		if r.err == nil {
			r.err = err
		}
	}
}

// call runs fn, turning a panic into an error so that one bad callback cannot take the writer down.
// A nested write's panic (nested.go) stays itself, for write to panic with again.
func (b *batcher) call(fn func(*Tx) error, tx *Tx) (err error) {
	if leave := b.db.enterWrite(); leave != nil {
		defer leave()
	}
	defer func() {
		if p := recover(); p != nil {
			if nested, ok := p.(*NestedWriteError); ok {
				err = nested
				return
			}
			err = fmt.Errorf("store: panic in write: %v", p)
		}
	}()
	return fn(tx)
}
