// Package store opens Kassa's database — the embedded SQLite file in the data directory by default,
// or a PostgreSQL server when a database URL is given — applies the embedded migrations, and runs
// work in transactions.
//
// Domain packages own their SQL. Most statements are shared between the two dialects: both accept
// $1-style placeholders, RETURNING and ON CONFLICT, and every time is stored as epoch milliseconds in
// a BIGINT, so no statement depends on a dialect's date functions. Where a statement must differ, the
// caller branches on DB.Dialect.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/kassapay/kassa/internal/private"
)

// Dialect names the SQL dialect of a DB.
type Dialect string

// The two supported dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Config says which database to open.
type Config struct {
	// DataDir holds the SQLite file kassa.db. It is created when missing. Ignored with DatabaseURL.
	DataDir string
	// DatabaseURL, when set, selects PostgreSQL: postgres://user:pass@host:port/db?sslmode=...
	DatabaseURL string
	// MaxConns bounds the PostgreSQL connections that write (default 16; a few more are kept for
	// reads), and the SQLite read pool (default 4).
	MaxConns int
	// Bounds bound connecting, a silent peer, and each write and read on PostgreSQL (zero: the
	// defaults); see Bounds.
	Bounds Bounds
	// Note is told, as slog's Info would take it, of each existing SQLite data directory, database or
	// journal whose mode Open changed to leave it to Kassa's user alone (nil: nobody is told).
	Note func(msg string, args ...any)
}

// Querier is what reads and writes need: a *sql.DB or a *sql.Tx.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// DB is an open database. Writes go through Write; reads may use Reader.
type DB struct {
	dialect  Dialect
	writer   *sql.DB // SQLite: one connection, owned by the batcher; PostgreSQL: the pool
	reader   *sql.DB // SQLite: a pool of query_only connections; PostgreSQL: the same pool as writer
	stmts    *stmtCache
	batch    *batcher      // SQLite only
	gate     chan struct{} // PostgreSQL only: FIFO admission of writes to the pool
	readGate chan struct{} // FIFO admission of reads to the read pool
	pgBatch  *pgBatcher    // PostgreSQL only
	where    string
	lockDir  string // SQLite: directory of the lock files
	batches  atomic.Pointer[func(n int)]
	sealer   atomic.Pointer[Sealer]
	health   health
	bounds   Bounds  // PostgreSQL only: zero on SQLite, which has no peer to lose
	writing  writing // goroutines running a write's callback, while CheckNestedWrites is on
}

// Open opens the database of cfg. It does not migrate; call Migrate.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.DatabaseURL != "" {
		return openPostgres(ctx, cfg)
	}
	return openSQLite(ctx, cfg)
}

func openPostgres(ctx context.Context, cfg Config) (*DB, error) {
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, errors.New("store: database URL must start with postgres:// or postgresql://")
	}
	// The URL may name several hosts (postgres://db1:5432,db2:5432/kassa?target_session_attrs=read-write),
	// which pgx tries in turn for every new connection, or one address in front of the cluster.
	pc, err := pgx.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("store: database URL: %w", err)
	}
	bounds := cfg.Bounds.withDefaults()
	settings := map[string]string{}
	for k, v := range u.Query() {
		settings[k] = v[0]
	}
	if v, ok := os.LookupEnv("PGCONNECT_TIMEOUT"); ok {
		settings["connect_timeout"] = v
	}
	applyBounds(pc, settings, bounds)
	db := &DB{dialect: Postgres, where: redact(u), bounds: bounds}
	pool := stdlib.OpenDB(*pc, stdlib.OptionShouldPing(db.checkIdle), stdlib.OptionAfterConnect(db.connected))
	n := cfg.MaxConns
	if n <= 0 {
		n = 16
	}
	// database/sql hands a freed connection to a random waiter, which under load leaves some requests
	// waiting seconds longer than others. Writes and reads therefore queue first at channels, which
	// admit them in order, n writes and n reads at a time, so that the pool (2n, and one connection
	// for each of the batcher's senders) never makes anyone wait.
	pool.SetMaxOpenConns(2*n + pgSenders)
	pool.SetMaxIdleConns(2*n + pgSenders)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	db.writer, db.reader, db.gate, db.readGate = pool, pool, make(chan struct{}, n), make(chan struct{}, n)
	if err := db.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: connect to %s: %w", db.where, err)
	}
	db.pgBatch = newPGBatcher(db)
	return db, nil
}

// redact is the URL without its password, for messages and logs.
func redact(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User(c.User.Username())
	}
	c.RawQuery = ""
	return c.String()
}

// SQLiteFile is the name of the SQLite database's file in its data directory.
const SQLiteFile = "kassa.db"

func openSQLite(ctx context.Context, cfg Config) (*DB, error) {
	dir := cfg.DataDir
	if dir == "" {
		dir = "kassa-data"
	}
	path, err := filepath.Abs(filepath.Join(dir, SQLiteFile))
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := ownOnly(dir, path, cfg.Note); err != nil {
		return nil, err
	}
	// synchronous=FULL: a commit is on disk when it returns, in WAL mode too. busy_timeout lets the
	// operator CLI and the server share the file. _txlock=immediate makes every transaction take the
	// write lock at BEGIN, so two writers never deadlock upgrading a read lock. The writer keeps its
	// savepoints' journals in memory (temp_store) and a 16 MiB page cache: a group commit's savepoints
	// otherwise wrote each page's first change to a temporary file, and a batch's dirty pages spilled
	// out of the default 2 MiB cache into the WAL before its commit, a write system call per page
	// (a third of a sale's CPU once sales recorded events). With ids in time order a batch of sales
	// dirties a few dozen pages; 64 MiB, the size before, filled up under load and was 90 MB of the
	// server's resident memory at 2,000 requests in flight, for no throughput.
	common := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)"
	writer, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_txlock=immediate&_pragma=cache_size(-16384)&_pragma=temp_store(2)&"+common)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxIdleTime(0)
	writer.SetConnMaxLifetime(0)
	// The writer's first connection switches the file to WAL before any reader opens it.
	if err := writer.PingContext(ctx); err != nil {
		writer.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	reader, err := sql.Open("sqlite", "file:"+path+"?_pragma=query_only(1)&"+common)
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	n := cfg.MaxConns
	if n <= 0 {
		n = 4
	}
	reader.SetMaxOpenConns(n)
	reader.SetMaxIdleConns(n)
	reader.SetConnMaxIdleTime(0)
	db := &DB{dialect: SQLite, writer: writer, reader: reader, stmts: newStmtCache(), where: path, lockDir: dir,
		readGate: make(chan struct{}, n)}
	db.batch = newBatcher(db)
	return db, nil
}

// DataDir makes the SQLite data directory dir, mode 0700 whatever the umask (package private). An
// existing directory of another mode is made 0700, and note is told so (nil: nobody is): a Kassa
// before this one left it as the umask made it, 0755 by default, which let every local user in.
func DataDir(dir string, note func(msg string, args ...any)) error {
	was, err := private.Dir(dir)
	if err != nil {
		return fmt.Errorf("store: data directory: %w", err)
	}
	noteChanged(note, "data directory", dir, was, private.DirMode)
	return nil
}

// noteChanged tells note, when was is not 0, that what at path had the mode was and now has mode.
func noteChanged(note func(msg string, args ...any), what, path string, was, mode fs.FileMode) {
	if was != 0 && note != nil {
		note("changed the mode of the "+what+" to Kassa's user alone", "path", path, "mode_was", fmt.Sprintf("%04o", was), "mode", fmt.Sprintf("%04o", mode))
	}
}

// ownOnly makes the data directory dir 0700 (DataDir) and the database at path 0600 with its journals
// (private.SQLite), whatever the umask, before SQLite opens it; note is told of each existing file whose
// mode was changed.
func ownOnly(dir, path string, note func(msg string, args ...any)) error {
	if err := DataDir(dir, note); err != nil {
		return err
	}
	changed, err := private.SQLite(path)
	for _, c := range changed {
		noteChanged(note, "database file", c.Path, c.Was, private.FileMode)
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// admit waits for a turn at gate, in arrival order; the returned function ends it.
func admit(ctx context.Context, gate chan struct{}) (func(), error) {
	select {
	case gate <- struct{}{}:
		return func() { <-gate }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Sealer seals the secrets that rows keep, and opens them again: the database's envelope keyring,
// whose data keys the database holds. Rows that one package writes in the transactions of others —
// the e-mails of the outbox, which invoices, webhooks and the dashboard queue — are sealed with the
// sealer their transaction reaches (Tx.Sealer), so that none of those callers can write them in clear.
type Sealer interface {
	Seal(plaintext, aad []byte) []byte
	Open(sealed, aad []byte) ([]byte, error)
}

// ErrNoSealer is returned by Sealer before the database's keyring is loaded.
var ErrNoSealer = errors.New("store: the key-encryption key was not loaded for this database, so no secret can be sealed in it")

// SetSealer makes s the database's sealer. envelope.NewKeyring sets the keyring it loads.
func (db *DB) SetSealer(s Sealer) { db.sealer.Store(&s) }

// Sealer is the database's sealer, or ErrNoSealer while none was set.
func (db *DB) Sealer() (Sealer, error) {
	if s := db.sealer.Load(); s != nil {
		return *s, nil
	}
	return nil, ErrNoSealer
}

// Dialect reports which SQL dialect the database speaks.
func (db *DB) Dialect() Dialect { return db.dialect }

// String describes the database for humans: the SQLite path, or the PostgreSQL URL without password.
// ObserveBatches has f told the size of every batch of writes committed together: the group commit's
// transactions on SQLite, the statements of one round trip on PostgreSQL.
func (db *DB) ObserveBatches(f func(n int)) { db.batches.Store(&f) }

// observeBatch tells the observer of batches, if any, that n writes were committed together.
func (db *DB) observeBatch(n int) {
	if f := db.batches.Load(); f != nil {
		(*f)(n)
	}
}

// Pools are the statistics of the database's connection pools by name: "write" and "read" on
// SQLite, "pool" on PostgreSQL, where reads and writes share one.
func (db *DB) Pools() map[string]sql.DBStats {
	if db.writer == db.reader {
		return map[string]sql.DBStats{"pool": db.writer.Stats()}
	}
	return map[string]sql.DBStats{"write": db.writer.Stats(), "read": db.reader.Stats()}
}

func (db *DB) String() string { return string(db.dialect) + ": " + db.where }

// Read runs fn with the read pool (on SQLite, query-only connections). Reads are admitted in arrival
// order, as many at a time as the pool has connections; fn must be done with its rows when it returns,
// and must not run two queries at once.
//
// On PostgreSQL the read, admission included, is bounded by Bounds.ReadTimeout: one that the database
// does not answer in time fails with ErrStorageUnavailable.
func (db *DB) Read(ctx context.Context, fn func(q Querier) error) error {
	s, ctx, end := newScope(ctx, db.bounds.ReadTimeout)
	defer end()
	done, err := admit(ctx, db.readGate)
	if err != nil {
		return readFault(timedOut(s, err))
	}
	defer done()
	return readFault(timedOut(s, fn(&reader{pool: db.reader, stmts: db.stmts, scope: s})))
}

// Reader is the read pool without admission: for tests and tools that read outside the server's
// load. Code on a request's path reads through Read.
func (db *DB) Reader() Querier { return &reader{pool: db.reader, stmts: db.stmts} }

// Raw is the write pool itself, with the driver and durability settings Kassa uses but without its
// group commit or statement cache: for measuring what the database does without Kassa.
func (db *DB) Raw() *sql.DB { return db.writer }

// ErrReadOnly is Ping's error when the PostgreSQL server that answered takes no writes: a standby, or
// a server whose default_transaction_read_only is on.
var ErrReadOnly = errors.New("store: the database server is read-only (a standby, not the primary)")

// Ping checks that the database answers. On PostgreSQL it checks that a session of the pool takes
// writes — it fails with ErrReadOnly on a standby — within the caller's deadline and at most
// Bounds.WriteTimeout, so that a primary that hangs fails it rather than hangs it; its outcome is
// what Health reports.
func (db *DB) Ping(ctx context.Context) error {
	if db.dialect == Postgres {
		ctx, cancel := context.WithTimeout(ctx, db.bounds.WriteTimeout)
		defer cancel()
		var readOnly string
		err := db.reader.QueryRowContext(ctx, "SHOW transaction_read_only").Scan(&readOnly)
		if err == nil && readOnly != "off" {
			err = ErrReadOnly
		}
		if err != nil {
			db.health.lost()
			return err
		}
		db.health.found()
		return nil
	}
	if err := db.reader.PingContext(ctx); err != nil {
		return err
	}
	var one int
	return db.reader.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// Scrub leaves nothing in the database's files of what was overwritten or deleted, for after secrets
// were replaced by their sealed form. SQLite keeps such bytes in its file's free space and in the
// write-ahead log: Scrub rebuilds the file (VACUUM) and empties the log (wal_checkpoint(TRUNCATE)),
// which takes a while on a large database, and writes wait meanwhile. On PostgreSQL it does nothing:
// the space of old row versions is reused after the server's vacuum, and the database's own WAL and
// backups are its operator's to keep.
func (db *DB) Scrub(ctx context.Context) error {
	if db.dialect != SQLite {
		return nil
	}
	db.notInWrite("Scrub")
	for _, stmt := range []string{"VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)"} {
		if _, err := db.writer.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("store: %s: %w", stmt, err)
		}
	}
	return nil
}

// Close finishes the queued writes and closes every connection.
func (db *DB) Close() error {
	if db.batch != nil {
		db.batch.close()
	}
	if db.pgBatch != nil {
		db.pgBatch.close()
	}
	db.stmts.close()
	err := db.writer.Close()
	if db.reader != db.writer {
		err = errors.Join(err, db.reader.Close())
	}
	return err
}

// Write runs fn in a transaction and returns once its work is durably committed, or rolled back when
// fn returns an error. fn must do nothing but database work through tx, and must not call Write,
// Exec or QueryRow of the same database, nor anything that does (on SQLite that waits for itself for
// ever; tests panic instead, see nested.go): on SQLite it may share the transaction with other
// callers (group commit, see tx.go), and on PostgreSQL a serialization failure or deadlock runs it
// again.
//
// A write that fails for want of storage returns an error that is ErrStorageUnavailable and carries
// the 503 storage_unavailable fault for the client. On PostgreSQL that includes a write that the
// database did not answer within Bounds.WriteTimeout, admission included: fn's statements run with
// the bounded context in place of the one given to Write (see scope).
func (db *DB) Write(ctx context.Context, fn func(tx *Tx) error) error {
	db.notInWrite("Write")
	if db.batch != nil {
		return db.written(db.batch.write(ctx, fn))
	}
	s, ctx, end := newScope(ctx, db.writeBound(ctx))
	defer end()
	done, err := admit(ctx, db.gate)
	if err != nil {
		return db.written(timedOut(s, err))
	}
	defer done()
	for attempt := 1; ; attempt++ {
		err := db.writeOnce(ctx, s, fn)
		if err == nil || attempt == 3 || !retryable(err) {
			return db.written(timedOut(s, err))
		}
	}
}

// Exec runs one statement that is a transaction by itself, returning once it is durably committed.
// Both backends group-commit such statements (see tx.go and pgbatch.go).
func (db *DB) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	db.notInWrite("Exec")
	if db.pgBatch != nil {
		s, ctx, end := newScope(ctx, db.writeBound(ctx))
		defer end()
		r := &stmtReq{ctx: ctx, query: query, args: args}
		if err := db.written(timedOut(s, db.pgBatch.do(r))); err != nil {
			return nil, err
		}
		return rowsAffected(r.rows), nil
	}
	var res sql.Result
	err := db.Write(ctx, func(tx *Tx) error {
		var err error
		res, err = tx.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// QueryRow is Exec for a statement that returns one row (an INSERT … RETURNING): it scans the row
// into dest.
func (db *DB) QueryRow(ctx context.Context, dest []any, query string, args ...any) error {
	db.notInWrite("QueryRow")
	if db.pgBatch != nil {
		s, ctx, end := newScope(ctx, db.writeBound(ctx))
		defer end()
		return db.written(timedOut(s, db.pgBatch.do(&stmtReq{ctx: ctx, query: query, args: args, dest: dest})))
	}
	return db.Write(ctx, func(tx *Tx) error {
		return tx.QueryRowContext(ctx, query, args...).Scan(dest...)
	})
}

func (db *DB) writeOnce(ctx context.Context, s *scope, fn func(tx *Tx) error) error {
	tx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	if leave := db.enterWrite(); leave != nil {
		defer leave()
	}
	finished := false
	defer func() {
		if !finished { // fn failed or panicked
			tx.Rollback()
		}
	}()
	if err := fn(&Tx{tx: tx, db: db, scope: s}); err != nil {
		return err
	}
	finished = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

func retryable(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == "40001" || pg.Code == "40P01")
}

// IsUniqueViolation reports whether err is a unique or primary-key constraint violation.
func IsUniqueViolation(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "23505"
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		return lite.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || lite.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}
