package acquirer

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the journal's database

	"github.com/kassapay/kassa/internal/private"
)

// schema is the journal's own: one row per request and its answer. Its only index is by approval day,
// which grows at its end; entries are found by reference from the book (book.refs), and journals
// made before that lose the index they had.
const schema = `
CREATE TABLE IF NOT EXISTS journal (
	id INTEGER PRIMARY KEY,
	received_at INTEGER NOT NULL,
	mti TEXT NOT NULL,
	processing_code TEXT NOT NULL,
	function_code TEXT NOT NULL,
	stan TEXT NOT NULL,
	transmission TEXT NOT NULL,
	rrn TEXT NOT NULL,
	terminal_id TEXT NOT NULL,
	merchant_id TEXT NOT NULL,
	reference TEXT NOT NULL,
	amount INTEGER NOT NULL,
	currency TEXT NOT NULL,
	pos_entry_mode TEXT NOT NULL,
	pos_condition TEXT NOT NULL,
	cvv2 INTEGER NOT NULL,
	au TEXT NOT NULL,
	pan_first6 TEXT NOT NULL,
	pan_last4 TEXT NOT NULL,
	original TEXT NOT NULL,
	response_code TEXT NOT NULL,
	auth_code TEXT NOT NULL,
	reversed INTEGER NOT NULL,
	approval_day TEXT NOT NULL,
	status TEXT NOT NULL,
	dropped INTEGER NOT NULL,
	note TEXT NOT NULL
);
DROP INDEX IF EXISTS journal_reference;
CREATE INDEX IF NOT EXISTS journal_approval_day ON journal (approval_day) WHERE approval_day <> '';
`

const columns = `id, received_at, mti, processing_code, function_code, stan, transmission, rrn, terminal_id,
	merchant_id, reference, amount, currency, pos_entry_mode, pos_condition, cvv2, au, pan_first6, pan_last4,
	original, response_code, auth_code, reversed, approval_day, status, dropped, note`

// journal keeps every request and answer in SQLite. Writes are group-committed: everything queued
// until a connection's reader flushes, and while a transaction commits, goes into the next
// transaction, and the requests of a transaction are answered once it is durable.
type journal struct {
	db     *sql.DB // one connection: the commits', and between commits the HTTP endpoints'
	insert *sql.Stmt
	mark   *sql.Stmt
	log    *slog.Logger
	// committed answers the requests of a transaction once it has committed (err nil) or failed.
	committed func(rs []*reply, err error)
	// failed is the first commit that failed: the host processes nothing from then on, since what it
	// decides could no longer be kept.
	failed atomic.Pointer[error]

	// commitMu is held by the one commit under way, in the goroutine that flushes.
	commitMu sync.Mutex
	mu       sync.Mutex
	queue    []write
	spare    []write
}

// write is one row to insert, the id of an earlier row it marks reversed (0: none), and the request
// to answer once it has committed.
type write struct {
	e        *Entry
	reverses int64
	then     *reply
}

func openJournal(dir string, log *slog.Logger, committed func(rs []*reply, err error)) (*journal, error) {
	path := filepath.Join(dir, "journal.db")
	// WAL with synchronous NORMAL: a commit is in the operating system's hands when it returns, so an
	// answer sent after it is never forgotten by a restart of the host, killed or not (what the tests
	// and an operator trying the connector do). Only a power loss could lose the last commits, which is
	// a real acquirer's concern, not an emulator's: an fsync per batch would cost the disk that Kassa,
	// on the same machine, needs for its own durable commits, and distort what the benchmark measures.
	//
	// Locking mode EXCLUSIVE, set before WAL: the host is the journal's only user (the data directory's
	// lock says so), so it takes the database's locks once instead of the shared-memory locks of every
	// transaction. Under load a batch holds one or two entries (they come one by one, and each commit is
	// short), so those locks were most of a commit's cost. No other connection can read the database
	// while the host runs: the HTTP endpoints read through the journal's one connection, between
	// commits.
	// Every file of the journal's database is 0600, whatever the umask.
	changed, err := private.SQLite(path)
	for _, c := range changed {
		log.Warn("changed the mode of the journal's file to the acquirer's user alone", "path", c.Path,
			"mode_was", fmt.Sprintf("%04o", c.Was), "mode", fmt.Sprintf("%04o", private.FileMode))
	}
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=locking_mode(EXCLUSIVE)&_pragma=journal_mode(WAL)&_txlock=immediate"+
		"&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	j := &journal{db: db, log: log, committed: committed}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("journal schema: %w", err)
	}
	j.insert, err = db.Prepare(`INSERT INTO journal (` + columns + `) VALUES (` + strings.Repeat("?, ", strings.Count(columns, ",")) + `?)`)
	if err == nil {
		j.mark, err = db.Prepare(`UPDATE journal SET reversed = 1 WHERE id = ?`)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return j, nil
}

// add queues e (and the mark of the row it reverses), to be committed by the next flush and a
// answered then. Writes commit in the order they were added.
func (j *journal) add(e *Entry, reverses int64, a *reply) {
	j.mu.Lock()
	j.queue = append(j.queue, write{e, reverses, a})
	j.mu.Unlock()
}

// flush commits everything queued, in the caller's goroutine, and then has its requests answered
// (committed). A flush that finds a commit under way waits for it, and then commits what was queued
// meanwhile, its own writes and those of other connections' readers together, unless one of them
// already has.
func (j *journal) flush() {
	j.commitMu.Lock()
	j.mu.Lock()
	q := j.queue
	j.queue, j.spare = j.spare[:0], nil
	j.mu.Unlock()
	if len(q) == 0 {
		j.commitMu.Unlock()
		return
	}
	err := j.commit(q)
	if err != nil && j.failed.CompareAndSwap(nil, &err) {
		j.log.Error("journal failed: the host refuses every request from now on", "err", err)
	}
	rs := make([]*reply, 0, len(q))
	for _, w := range q {
		if w.then != nil {
			rs = append(rs, w.then)
		}
	}
	clear(q) // let the entries go
	j.mu.Lock()
	j.spare = q
	j.mu.Unlock()
	j.commitMu.Unlock()
	j.committed(rs, err)
}

func (j *journal) commit(q []write) error {
	tx, err := j.db.Begin()
	if err != nil {
		return err
	}
	insert, mark := tx.Stmt(j.insert), tx.Stmt(j.mark)
	for _, w := range q {
		e := w.e
		if _, err := insert.Exec(e.ID, e.ReceivedAt.UnixMilli(), e.MTI, e.ProcessingCode, e.FunctionCode, e.STAN,
			e.Transmission, e.RRN, e.TerminalID, e.MerchantID, e.Reference, e.Amount, e.Currency, e.EntryMode,
			e.Condition, e.CVV2, e.AU, e.PANFirst6, e.PANLast4, e.Original, e.ResponseCode, e.AuthCode, e.Reversed,
			e.ApprovalDay, e.Status, e.Dropped, e.Note); err != nil {
			tx.Rollback()
			return fmt.Errorf("journal entry %d: %w", e.ID, err)
		}
		if w.reverses != 0 {
			if _, err := mark.Exec(w.reverses); err != nil {
				tx.Rollback()
				return fmt.Errorf("journal: mark %d reversed: %w", w.reverses, err)
			}
		}
	}
	return tx.Commit()
}

// failure is the commit failure that stopped the journal, or nil.
func (j *journal) failure() error {
	if err := j.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// close commits what is queued and closes the database.
func (j *journal) close() error {
	j.flush()
	return j.db.Close()
}

// entries calls fn for each row that the query after "SELECT columns FROM journal" selects, in order.
// The journal's connection is held until the last call: fn should not wait.
func (j *journal) entries(ctx context.Context, fn func(*Entry) error, where string, args ...any) error {
	rows, err := j.db.QueryContext(ctx, `SELECT `+columns+` FROM journal `+where, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var e Entry
		var received int64
		if err := rows.Scan(&e.ID, &received, &e.MTI, &e.ProcessingCode, &e.FunctionCode, &e.STAN, &e.Transmission,
			&e.RRN, &e.TerminalID, &e.MerchantID, &e.Reference, &e.Amount, &e.Currency, &e.EntryMode, &e.Condition,
			&e.CVV2, &e.AU, &e.PANFirst6, &e.PANLast4, &e.Original, &e.ResponseCode, &e.AuthCode, &e.Reversed,
			&e.ApprovalDay, &e.Status, &e.Dropped, &e.Note); err != nil {
			return err
		}
		e.ReceivedAt = time.UnixMilli(received).UTC()
		if err := fn(&e); err != nil {
			return err
		}
	}
	return rows.Err()
}

// replay rebuilds b from the whole journal and returns the last id.
func (j *journal) replay(ctx context.Context, b *book) (last int64, err error) {
	err = j.entries(ctx, func(e *Entry) error {
		b.apply(e)
		last = e.ID
		return nil
	}, `ORDER BY id`)
	return last, err
}
