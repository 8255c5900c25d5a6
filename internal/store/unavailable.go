package store

import (
	"context"
	"database/sql/driver"
	"errors"
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

// health remembers whether the last write failed for want of storage, for readiness.
type health struct{ faulted atomic.Bool }

// written classifies the outcome of a write: an error of the storage becomes a *storageError and
// marks the database faulted; a success clears the mark.
func (db *DB) written(err error) error {
	switch {
	case err == nil:
		if db.health.faulted.Load() {
			db.health.faulted.Store(false)
		}
		return nil
	case errors.Is(err, ErrStorageUnavailable):
		db.health.faulted.Store(true)
		return err
	case isStorageFault(err):
		db.health.faulted.Store(true)
		return &storageError{cause: err}
	}
	return err
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
		// disk_full, connection_exception (class 08), admin_shutdown, crash_shutdown, cannot_connect_now
		return pg.Code == "53100" || strings.HasPrefix(pg.Code, "08") || pg.Code == "57P01" || pg.Code == "57P02" || pg.Code == "57P03"
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
