package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Bounds on a PostgreSQL primary that dies or hangs.
//
// A primary whose machine dies leaves Kassa's sockets open on a peer that never answers again; one
// whose processes hang (stopped, swapping, stuck on a disk) leaves them open on a peer whose kernel
// still acknowledges everything while nothing answers. Neither closes a connection by itself, so
// without bounds every pooled connection, the batcher's held ones and every request waiting on them
// stay stuck for ever, and no new connection ever looks for the new primary. Kassa therefore bounds:
//
//   - connecting, per host of the URL (ConnectTimeout): a multi-host URL moves on to the next host;
//   - a silent peer at the TCP level (TCPTimeout): keepalive probes and TCP_USER_TIMEOUT close a
//     socket whose peer is gone within that time, even with no statement running;
//   - every write, transaction or single statement, admission included (WriteTimeout), and every read
//     (ReadTimeout), by the deadline of the context its statements run with: pgx closes a connection
//     whose statement outlives its context, and the pool opens a new one for the next caller;
//   - a pooled connection idle for over a second is pinged before reuse, within PingTimeout, and
//     dropped when it does not answer.
//
// A write cut off by its bound fails with ErrStorageUnavailable (503 storage_unavailable, with
// Retry-After): the request did not complete, and its retry with the same Idempotency-Key finds out
// what the database holds.
type Bounds struct {
	// ConnectTimeout bounds connecting to each host of the URL (default 3 s), unless the URL says
	// connect_timeout.
	ConnectTimeout time.Duration
	// TCPTimeout is how long a socket whose peer has gone silent stays open (default 10 s): TCP
	// keepalive starts probing after a third of it, and TCP_USER_TIMEOUT (Linux) closes a socket
	// whose sent data stays unacknowledged that long.
	TCPTimeout time.Duration
	// WriteTimeout bounds each write, from its admission to its commit (default 10 s).
	WriteTimeout time.Duration
	// ReadTimeout bounds each read (default 30 s): listings and exports read more than a write writes.
	ReadTimeout time.Duration
}

// Defaults of Bounds.
const (
	DefaultConnectTimeout = 3 * time.Second
	DefaultTCPTimeout     = 10 * time.Second
	DefaultWriteTimeout   = 10 * time.Second
	DefaultReadTimeout    = 30 * time.Second
)

// withDefaults is b with each unset bound at its default.
func (b Bounds) withDefaults() Bounds {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&b.ConnectTimeout, DefaultConnectTimeout)
	def(&b.TCPTimeout, DefaultTCPTimeout)
	def(&b.WriteTimeout, DefaultWriteTimeout)
	def(&b.ReadTimeout, DefaultReadTimeout)
	return b
}

// pingTimeout bounds the check of a pooled connection before reuse: as long as connecting, which a
// fresh connection in its place costs anyway.
func (b Bounds) pingTimeout() time.Duration { return b.ConnectTimeout }

// applyBounds sets on cfg what its URL (settings, the parsed connection string's keys) does not say:
// the connect timeout, a dialer with keepalive and TCP_USER_TIMEOUT, and the server's
// idle_in_transaction_session_timeout, which ends, on the server's side, a transaction whose Kassa
// node died with it open.
func applyBounds(cfg *pgx.ConnConfig, settings map[string]string, b Bounds) {
	if _, set := settings["connect_timeout"]; !set {
		cfg.ConnectTimeout = b.ConnectTimeout
	}
	d := &net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: b.TCPTimeout / 3,
			Interval: b.TCPTimeout / 6, Count: 3},
		Control: func(network, address string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil // a Unix socket has no peer to lose
			}
			return userTimeout(c, b.TCPTimeout)
		},
	}
	cfg.DialFunc = d.DialContext
	if _, set := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint((2 * b.WriteTimeout).Milliseconds())
	}
}

// writeBoundKey keys a context's own write bound (WithWriteBound).
type writeBoundKey struct{}

// WithWriteBound returns ctx whose writes (Write, Exec, QueryRow) are bounded by d on PostgreSQL in
// place of Bounds.WriteTimeout: for background work whose transactions are long by design, such as
// the overview's roll of a chunk of the ledger, which a hung primary then holds up for d rather than
// failing it at the payment path's bound. SQLite's writes stay unbounded.
func WithWriteBound(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, writeBoundKey{}, d)
}

// writeBound is the bound of a write made with ctx: its own (WithWriteBound) or Bounds.WriteTimeout;
// none on SQLite.
func (db *DB) writeBound(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(writeBoundKey{}).(time.Duration); ok && d > 0 && db.bounds.WriteTimeout > 0 {
		return d
	}
	return db.bounds.WriteTimeout
}

// scope bounds the statements of one write or read by the deadline of its context. Callers hand Write
// and Read a context and run their statements with it, or with one derived from it: the context the
// caller gave stands for the bounded one, and any other is given the bounded one's deadline when it
// has no earlier one. The contexts so derived end when the write or read does (end).
type scope struct {
	caller  context.Context // the context given to Write or Read
	ctx     context.Context // caller, bounded
	limit   time.Duration   // the bound
	cancels []context.CancelFunc
}

// newScope bounds caller by d, returning the scope, the bounded context and the function that ends
// them. Without a bound (d 0: SQLite, which has no peer to lose) the scope is nil, and leaves every
// context as it is.
func newScope(caller context.Context, d time.Duration) (*scope, context.Context, context.CancelFunc) {
	if d <= 0 {
		return nil, caller, func() {}
	}
	ctx, cancel := context.WithTimeout(caller, d)
	s := &scope{caller: caller, ctx: ctx, limit: d}
	return s, ctx, func() {
		for _, c := range s.cancels {
			c()
		}
		cancel()
	}
}

// bound is the context to run a statement with in place of ctx.
func (s *scope) bound(ctx context.Context) context.Context {
	if s == nil || ctx == s.ctx {
		return ctx
	}
	if ctx == s.caller {
		return s.ctx
	}
	d, _ := s.ctx.Deadline()
	if own, ok := ctx.Deadline(); ok && !own.After(d) {
		return ctx
	}
	ctx, cancel := context.WithDeadline(ctx, d)
	s.cancels = append(s.cancels, cancel)
	return ctx
}

// timedOut reports whether err says that a bound of Kassa's, not the caller, ended the work: the
// scope's, or the connect timeout of a connection it waited for (the database did not answer in time).
func (s *scope) timedOut(err error) bool {
	return s != nil && s.caller.Err() == nil && (s.ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded))
}

// checkIdle checks a pooled connection before it is reused. One opened before the latest outage
// began (the first write or readiness check that found no primary) is closed, whatever it answers
// now: its server may be a primary that stopped answering and came back (a frozen machine continued)
// before Patroni demoted it, whose data is from before the failover. A connection opened during the
// outage was opened to a server taking writes then: the new primary. One idle
// for over a second is pinged, as pgx does by default, but within the ping bound rather than the
// caller's whole deadline: a connection to a primary that hangs costs its caller that long, not its
// write. It returns true, for pgx to ping again, only when it closed the connection: pgx's own ping
// then fails at once and database/sql takes another connection.
func (db *DB) checkIdle(ctx context.Context, p stdlib.ShouldPingParams) bool {
	if opened, _ := p.Conn.PgConn().CustomData()[openedKey].(int64); opened < db.health.outageBegan.Load() {
		p.Conn.PgConn().Close(ctx)
		return true
	}
	if p.IdleDuration <= time.Second {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, db.bounds.pingTimeout())
	defer cancel()
	return p.Conn.PgConn().Ping(ctx) != nil
}

// openedKey is a connection's custom data (pgconn.PgConn.CustomData): when it was opened, in Unix
// nanoseconds.
const openedKey = "kassa.opened"

// connected counts a connection opened, and records when.
func (db *DB) connected(_ context.Context, c *pgx.Conn) error {
	c.PgConn().CustomData()[openedKey] = time.Now().UnixNano()
	db.health.opened.Add(1)
	return nil
}
