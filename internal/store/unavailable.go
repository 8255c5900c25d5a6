package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/kassapay/kassa/internal/fault"
)

// ErrStorageUnavailable is what a write that failed for want of storage is (errors.Is): on SQLite,
// the disk is full or failing (SQLITE_FULL, SQLITE_IOERR); on PostgreSQL, the server's disk is full or
// the connection was lost. Then writes fail with 503 storage_unavailable, reads still work, nothing
// is corrupted, and writes resume once space is freed. The write's transaction is
// rolled back whole — SQLite and PostgreSQL both undo a transaction that did not commit — so nothing
// is half-applied; on PostgreSQL a connection lost while COMMIT was on its way leaves the outcome to
// the server, which applied all or nothing, and the retry of the request with its Idempotency-Key
// finds out which.
var ErrStorageUnavailable = errors.New("store: storage unavailable")

// storageFault is the answer a client gets for a write that failed for want of storage: a 503 that
// says to retry, never stored as the request's answer under its Idempotency-Key (RetryAfter).
var storageFault = &fault.Error{Status: http.StatusServiceUnavailable, Code: "storage_unavailable",
	Message:    "Kassa cannot write to or reach its database just now (its storage is full, or the connection was lost), and did not complete the request. Retry later with the same Idempotency-Key.",
	RetryAfter: 5 * time.Second}

// storageError is a write's error caused by its storage: ErrStorageUnavailable, answered as
// storageFault, carrying its cause for the log.
type storageError struct{ cause error }

func (e *storageError) Error() string   { return "store: storage unavailable: " + e.cause.Error() }
func (e *storageError) Unwrap() []error { return []error{ErrStorageUnavailable, storageFault, e.cause} }

// health remembers whether the last write failed for want of storage, for readiness, and how the
// connection to the primary has fared, for the metrics (Health).
type health struct {
	faulted atomic.Bool
	lostAt  atomic.Int64 // Unix nanoseconds since when no primary answered; 0 while one does
	// outageBegan is when the latest outage began (lostAt's value then), in Unix nanoseconds; 0 if none.
	outageBegan atomic.Int64
	lostNanos   atomic.Int64 // time without a primary, outages that ended
	reconnects  atomic.Int64
	opened      atomic.Int64
}

// Health is how Kassa's connection to its database has fared since it was opened.
type Health struct {
	// Reconnects counts the times a primary answered again after none did: after a failover, a
	// restart or a network cut.
	Reconnects int64
	// Opened counts the connections opened, the first ones included.
	Opened int64
	// Unavailable is the time during which no primary answered, the outage still going on included.
	Unavailable time.Duration
	// Available is false while no primary answers: a write or readiness check last failed for want of
	// one.
	Available bool
}

// Health reports how the connection to the database has fared.
func (db *DB) Health() Health {
	h := Health{Reconnects: db.health.reconnects.Load(), Opened: db.health.opened.Load(),
		Unavailable: time.Duration(db.health.lostNanos.Load()), Available: true}
	if at := db.health.lostAt.Load(); at != 0 {
		h.Available = false
		h.Unavailable += time.Since(time.Unix(0, at))
	}
	return h
}

// lost records that no primary answered, from now unless that was already known.
func (h *health) lost() {
	if now := time.Now().UnixNano(); h.lostAt.CompareAndSwap(0, now) {
		h.outageBegan.Store(now)
	}
}

// found records that a primary answered, ending the outage, if there was one, as a reconnect.
func (h *health) found() {
	at := h.lostAt.Load()
	if at != 0 && h.lostAt.CompareAndSwap(at, 0) {
		h.lostNanos.Add(int64(time.Since(time.Unix(0, at))))
		h.reconnects.Add(1)
	}
}

// written classifies the outcome of a write: an error of the storage becomes a *storageError and
// marks the database faulted; a success clears the mark.
func (db *DB) written(err error) error {
	switch {
	case err == nil:
		if db.health.faulted.Load() {
			db.health.faulted.Store(false)
		}
		db.health.found()
		return nil
	case errors.Is(err, ErrStorageUnavailable):
		db.health.faulted.Store(true)
		if noPrimary(err) {
			db.health.lost()
		}
		return err
	case isStorageFault(err):
		db.health.faulted.Store(true)
		if noPrimary(err) {
			db.health.lost()
		}
		return &storageError{cause: err}
	}
	return err
}

// errNoAnswer is the cause of a write or read that its bound cut off: the database did not answer.
var errNoAnswer = errors.New("the database did not answer in time")

// timedOut is err as a storage fault when the bound of s, not its caller, ended it.
func timedOut(s *scope, err error) error {
	if err != nil && s.timedOut(err) && !errors.Is(err, ErrStorageUnavailable) {
		return &storageError{cause: fmt.Errorf("%w (%v): %w", errNoAnswer, s.limit, err)}
	}
	return err
}

// noPrimary reports whether err says that no primary answered — the connection was lost, refused, or
// found a read-only server, or the database did not answer in time — rather than that the one that
// answered is out of space.
func noPrimary(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code != "53100"
	}
	var lite *sqlite.Error
	return !errors.As(err, &lite)
}

// readFault classifies a read's error: one of the storage (a lost connection) becomes a
// *storageError, answered 503; a read does not mark the database unwritable.
func readFault(err error) error {
	if err != nil && !errors.Is(err, ErrStorageUnavailable) && isStorageFault(err) {
		return &storageError{cause: err}
	}
	return err
}

// isStorageFault reports whether err comes from the storage rather than from the write itself.
func isStorageFault(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up: nothing is wrong with the storage
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		switch lite.Code() & 0xff { // the primary code of an extended one (SQLITE_IOERR_WRITE, …)
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR:
			return true
		}
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		// disk_full, connection_exception (class 08), admin_shutdown, crash_shutdown, cannot_connect_now,
		// read_only_sql_transaction: a connection that reached a standby (an address in front of the
		// cluster that still points at the old primary, now demoted), which takes no write
		return pg.Code == "53100" || strings.HasPrefix(pg.Code, "08") || pg.Code == "57P01" || pg.Code == "57P02" ||
			pg.Code == "57P03" || pg.Code == "25006"
	}
	var connect *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connect) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, driver.ErrBadConn) || pgconn.SafeToRetry(err)
}

// Writable checks, after a write failed for want of storage, that writes work again, with a write of
// its own; it returns ErrStorageUnavailable while they do not. Without such a failure it does nothing:
// readiness costs no write while all is well.
func (db *DB) Writable(ctx context.Context) error {
	if !db.health.faulted.Load() {
		return nil
	}
	_, err := db.Exec(ctx, `UPDATE readiness SET checked_at = $1 WHERE id = 1`, time.Now().UnixMilli())
	return err
}

// Backoff of Again: the first wait, doubled after each failure up to the last.
const (
	againFirst = 50 * time.Millisecond
	againLast  = time.Second
)

// InDoubt reports whether err, a write's error, leaves the write in doubt: on PostgreSQL a write that
// failed with ErrStorageUnavailable — the database was not reached or did not answer — may have been
// committed with only its answer lost. On SQLite never: a write that failed, for want of space or of
// a working disk, was rolled back whole and is known not to be there, so there is nothing to settle
// (and a settling write that found nothing to change would pass for the storage having come back).
func (db *DB) InDoubt(err error) bool {
	return db.dialect == Postgres && errors.Is(err, ErrStorageUnavailable)
}

// Again runs write again after err, the error of its last run, while that error leaves it in doubt
// (InDoubt), with a short backoff, until deadline; it returns the error of the last run. Each run
// takes a new connection: the store drops one whose answer was lost. Only a write whose second run
// after a committed first changes nothing may be run again so: an UPDATE conditional on the state it
// changes, a DELETE of a row named whole. A run begun before deadline may end after it, by the write
// bound at most.
func (db *DB) Again(deadline time.Time, err error, write func() error) error {
	for wait := againFirst; db.InDoubt(err); wait = min(2*wait, againLast) {
		if !time.Now().Add(wait).Before(deadline) {
			return err
		}
		time.Sleep(wait)
		err = write()
	}
	return err
}
