package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/store"
)

// What a delivery is allowed, by issue 18, point 3.
const (
	// Timeout bounds one attempt, from dialing to the end of the answer: "a 15-second timeout".
	Timeout = 15 * time.Second
	// MaxInFlight is how many deliveries to one endpoint are sent at once, over every node: "at most 4
	// deliveries in flight per endpoint".
	MaxInFlight = 4
	// DisableAfter is how long every delivery to an endpoint may fail before Kassa disables it: "an
	// endpoint failing every delivery for 5 days is disabled and its merchant is e-mailed".
	DisableAfter = 5 * 24 * time.Hour
	// ResponseLimit is how much of an answer the delivery log keeps: "the first 1 KiB of the answer".
	ResponseLimit = 1024
	// MinLease is the shortest lease of a delivery: an attempt's Timeout, and 15 s to record it.
	MinLease = Timeout + 15*time.Second
	// UserAgent names Kassa to the merchant's server.
	UserAgent = "Kassa-Webhooks/1.0"
)

// Config configures a Deliverer.
type Config struct {
	DB      *store.DB
	Keyring *envelope.Keyring // opens the endpoints' sealed signing secrets
	Logger  *slog.Logger
	// Now is the clock of schedules, leases and the webhook-timestamp header (default time.Now).
	Now func() time.Time
	// AllowPrivate lets deliveries reach loopback, private and other non-public addresses (kassa serve
	// --webhooks-allow-private: for development and tests). Without it they are refused.
	AllowPrivate bool
	// Metrics counts the attempts by result (nil: not counted).
	Metrics *metrics.Set
	// Node names this deliverer in its log (default random).
	Node string
	// RootCAs, when set, are the only certificate authorities trusted for endpoints (tests' receivers);
	// by default the system's.
	RootCAs *x509.CertPool
	// Poll is how often due deliveries are looked for (default 500 ms). A worker that has sent a
	// delivery takes the next one due for the same endpoint at once, without waiting for it.
	Poll time.Duration
	// Workers bounds the deliveries this node sends at once, over every endpoint (default 128).
	Workers int
	// Lease is how long a node holds a delivery it sends (default and at least MinLease).
	// The deliveries of a node that died are sent again once their lease is over.
	Lease time.Duration
}

// Deliverer sends the deliveries that event.Record queued: each to its endpoint, signed by the
// Standard Webhooks specification, retried on Schedule until it succeeds or fails for good, each
// attempt written to webhook_attempts. Any number of nodes may run one on the same database: a
// delivery is sent by the node that holds its lease.
type Deliverer struct {
	cfg    Config
	client *http.Client
	slots  chan struct{} // one per delivery being sent by this node
	wg     sync.WaitGroup
}

// New returns a Deliverer; Run starts it.
func New(cfg Config) *Deliverer {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Node == "" {
		cfg.Node = "node-" + rand.Text()[:8]
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 128
	}
	if cfg.Lease < MinLease {
		cfg.Lease = MinLease
	}
	dialer := &net.Dialer{Timeout: Timeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = refuseNotPublic
	}
	transport := &http.Transport{
		Proxy:                 nil, // never a proxy from the environment: the address checked is the address dialed
		DialContext:           dialer.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   Timeout,
		ResponseHeaderTimeout: Timeout,
		MaxIdleConnsPerHost:   4 * MaxInFlight,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	client := &http.Client{Transport: transport, Timeout: Timeout,
		// "No redirects followed": a 3xx is the answer, and a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Deliverer{cfg: cfg, client: client, slots: make(chan struct{}, cfg.Workers)}
}

// Run sends due deliveries until ctx is done, then waits for the attempts under way (at most
// Timeout) and records them.
func (d *Deliverer) Run(ctx context.Context) {
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		if err := d.dispatch(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Logger.WarnContext(ctx, "webhook deliveries", "node", d.cfg.Node, "err", err)
		}
		select {
		case <-ctx.Done():
			d.wg.Wait()
			return
		case <-t.C:
		}
	}
}

// ReleaseAll frees every lease: for a node that is the only one on its database (SQLite), at start,
// when no attempt of a previous process can still be under way, so that what it was sending when it
// died is sent at once rather than after its lease.
func (d *Deliverer) ReleaseAll(ctx context.Context) error {
	_, err := d.cfg.DB.Exec(ctx, `UPDATE webhook_deliveries SET lease_until = NULL WHERE status = 'PENDING' AND lease_until IS NOT NULL`)
	return err
}

// claimed is a delivery this node holds the lease of, with what it sends when that was read in the
// transaction that took the lease.
type claimed struct {
	id, endpoint int64
	attempts     int
	msg          *message
}

// message is what a delivery sends, and to whom: its event, and its endpoint as it stands.
type message struct {
	eventID, typ, data, target string
	createdAt                  int64
	secrets                    SealedSecrets
	failingSince               sql.NullInt64
	disabled                   bool
}

// messageColumns are a message's columns, from events e and webhook_endpoints w, in dest's order.
const messageColumns = `e.event_id, e.type, e.data, e.created_at, w.endpoint_id, w.url, w.secret, w.previous_secret, w.previous_until,
	w.disabled, w.failing_since`

func (m *message) dest() []any {
	return []any{&m.eventID, &m.typ, &m.data, &m.createdAt, &m.secrets.EndpointID, &m.target, &m.secrets.Secret, &m.secrets.Previous,
		&m.secrets.PreviousUntil, &m.disabled, &m.failingSince}
}

// rowQuerier is what reads a message: the read pool, or the transaction that took the lease.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// load reads the message of delivery id; nil when the delivery is gone.
func load(ctx context.Context, q rowQuerier, id int64) (*message, error) {
	var m message
	err := q.QueryRowContext(ctx, `SELECT `+messageColumns+` FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
		JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE d.id = $1`, id).Scan(m.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return &m, err
}

// notDone is the condition of an UPDATE of a delivery by id that applies only while the delivery is
// PENDING, written so that it leaves PostgreSQL nothing to choose but the primary key. The queue's
// partial indexes are WHERE status = 'PENDING', and their statistics are those of the last ANALYZE,
// which usually saw no delivery pending: "status = 'PENDING'" lets the planner scan one of them,
// which it believes holds a row or two, rather than look the id up — and once a backlog builds up it
// walked thousands of entries for each delivery recorded (10 ms each, instead of a tenth of one).
// "NOT IN" the two other statuses says the same and matches no index's predicate.
const notDone = `status NOT IN ('SUCCEEDED', 'FAILED')`

// dueSQL finds a delivery due at $1 that no live lease holds, by dialect. On PostgreSQL it looks
// endpoint by endpoint through the (endpoint_id, next_attempt) index, which no other query of the
// queue can take for another (see notDone); there is no index of the pending deliveries by time alone.
var dueSQL = map[store.Dialect]string{
	store.SQLite: `SELECT 1 FROM webhook_deliveries WHERE status = 'PENDING' AND next_attempt <= $1
	AND (lease_until IS NULL OR lease_until < $1) LIMIT 1`,
	store.Postgres: `SELECT 1 FROM webhook_endpoints w WHERE w.disabled = FALSE AND EXISTS (SELECT 1 FROM webhook_deliveries d
	WHERE d.endpoint_id = w.id AND d.status = 'PENDING' AND d.next_attempt <= $1 AND (d.lease_until IS NULL OR d.lease_until < $1)) LIMIT 1`,
}

// claimSQL leases ($2, until) up to $3 deliveries due at $1, to enabled endpoints, none beyond the
// $4-th lease held on its endpoint; the earliest due first. On PostgreSQL a row that another node
// leased meanwhile is re-checked against the outer WHERE once that node commits, and skipped; and the
// due deliveries are found endpoint by endpoint, as dueSQL's are.
var claimSQL = map[store.Dialect]string{store.SQLite: claimSQLite, store.Postgres: claimPostgres}

const claimSQLite = `WITH busy AS (SELECT endpoint_id, COUNT(*) AS n FROM webhook_deliveries
		WHERE status = 'PENDING' AND lease_until >= $1 GROUP BY endpoint_id),
	due AS (SELECT d.id, d.endpoint_id, d.next_attempt FROM webhook_deliveries d
		WHERE d.status = 'PENDING' AND d.next_attempt <= $1 AND (d.lease_until IS NULL OR d.lease_until < $1)
		AND NOT EXISTS (SELECT 1 FROM busy WHERE busy.endpoint_id = d.endpoint_id AND busy.n >= $4)
		AND EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.id = d.endpoint_id AND w.disabled = FALSE)
		ORDER BY d.next_attempt LIMIT 1000),
	ranked AS (SELECT due.id, ROW_NUMBER() OVER (PARTITION BY due.endpoint_id ORDER BY due.next_attempt, due.id)
		+ COALESCE(busy.n, 0) AS k, due.next_attempt FROM due LEFT JOIN busy ON busy.endpoint_id = due.endpoint_id)
	UPDATE webhook_deliveries SET lease_until = $2
	WHERE id IN (SELECT id FROM ranked WHERE k <= $4 ORDER BY next_attempt LIMIT $3)
		AND ` + notDone + ` AND (lease_until IS NULL OR lease_until < $1)
	RETURNING id, endpoint_id, attempts`

const claimPostgres = `WITH busy AS (SELECT endpoint_id, COUNT(*) AS n FROM webhook_deliveries
		WHERE status = 'PENDING' AND lease_until >= $1 GROUP BY endpoint_id),
	due AS (SELECT d.id, d.next_attempt FROM webhook_endpoints w LEFT JOIN busy ON busy.endpoint_id = w.id
		CROSS JOIN LATERAL (SELECT x.id, x.next_attempt FROM webhook_deliveries x
			WHERE x.endpoint_id = w.id AND x.status = 'PENDING' AND x.next_attempt <= $1 AND (x.lease_until IS NULL OR x.lease_until < $1)
			ORDER BY x.next_attempt, x.id LIMIT GREATEST($4 - COALESCE(busy.n, 0), 0)) d
		WHERE w.disabled = FALSE)
	UPDATE webhook_deliveries SET lease_until = $2
	WHERE id IN (SELECT id FROM due ORDER BY next_attempt LIMIT $3)
		AND ` + notDone + ` AND (lease_until IS NULL OR lease_until < $1)
	RETURNING id, endpoint_id, attempts`

// claimNext is claimNextSQL without and with the lock, built once.
var claimNext = map[bool]string{false: fmt.Sprintf(claimNextSQL, ""), true: fmt.Sprintf(claimNextSQL, " FOR UPDATE SKIP LOCKED")}

// dispatch leases as many due deliveries as this node has free workers for, and starts them.
func (d *Deliverer) dispatch(ctx context.Context) error {
	free := cap(d.slots) - len(d.slots)
	if free == 0 || ctx.Err() != nil {
		return nil
	}
	now := d.cfg.Now().UnixMilli()
	due := false
	if err := d.cfg.DB.Read(ctx, func(q store.Querier) error {
		err := q.QueryRowContext(ctx, dueSQL[d.cfg.DB.Dialect()], now).Scan(new(int))
		due = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}); err != nil || !due {
		return err
	}
	var batch []claimed
	err := d.cfg.DB.Write(ctx, func(tx *store.Tx) error {
		batch = batch[:0]
		rows, err := tx.QueryContext(ctx, claimSQL[tx.Dialect()], now, now+d.cfg.Lease.Milliseconds(), free, MaxInFlight)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c claimed
			if err := rows.Scan(&c.id, &c.endpoint, &c.attempts); err != nil {
				return err
			}
			batch = append(batch, c)
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	for _, c := range batch {
		d.slots <- struct{}{} // never blocks: only dispatch takes slots, and it took no more than were free
		d.wg.Go(func() {
			defer func() { <-d.slots }()
			d.work(ctx, c)
		})
	}
	return nil
}

// work sends a claimed delivery, records the attempt, and goes on with the next delivery due for the
// same endpoint, taken in the same transaction, until there is none or ctx is done.
func (d *Deliverer) work(ctx context.Context, c claimed) {
	for {
		o, ok, err := d.attempt(ctx, c)
		var next *claimed
		if err == nil && ok {
			d.cfg.Metrics.WebhookAttempt(o.status)
			next, err = d.record(ctx, c, o, ctx.Err() == nil)
		} else if err == nil {
			err = d.release(ctx, c)
		}
		if err != nil {
			d.cfg.Logger.WarnContext(ctx, "webhook delivery not recorded; it is sent again when its lease is over",
				"node", d.cfg.Node, "delivery", c.id, "err", err)
			return
		}
		if next == nil {
			return
		}
		c = *next
	}
}

// Backlog counts the deliveries neither succeeded nor failed for good, through the index of pending
// deliveries.
func Backlog(ctx context.Context, db *store.DB) (int, error) {
	var n int
	err := db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'PENDING'`).Scan(&n)
	})
	return n, err
}

// release gives up the lease of a delivery not attempted.
func (d *Deliverer) release(ctx context.Context, c claimed) error {
	_, err := d.cfg.DB.Exec(context.WithoutCancel(ctx), `UPDATE webhook_deliveries SET lease_until = NULL WHERE id = $1 AND `+notDone, c.id)
	return err
}

// outcome is what one attempt came to.
type outcome struct {
	at         time.Time     // when it was made (Now)
	status     int           // the HTTP status, 0 when there was no answer
	latency    time.Duration // from the request to the end of the answer read
	response   string        // the first ResponseLimit bytes of the answer
	err        string        // why there was no answer
	retryAfter time.Duration // how long the answer asked to be left alone
	failing    bool          // the endpoint was failing when the attempt was made
}

func (o outcome) succeeded() bool { return o.status >= 200 && o.status < 300 }

// attempt sends a delivery once. It reports false, with nothing sent, when the delivery or its endpoint
// is gone or disabled meanwhile.
func (d *Deliverer) attempt(ctx context.Context, c claimed) (outcome, bool, error) {
	rctx := context.WithoutCancel(ctx)
	m := c.msg
	if m == nil {
		if err := d.cfg.DB.Read(rctx, func(q store.Querier) error {
			var err error
			m, err = load(rctx, q, c.id)
			return err
		}); err != nil {
			return outcome{}, false, err
		}
	}
	if m == nil || m.disabled {
		return outcome{}, false, nil
	}
	at := d.cfg.Now()
	signing, err := m.secrets.SigningSecrets(d.cfg.Keyring, at)
	if err != nil {
		return outcome{}, false, err
	}
	body := Body(m.typ, time.UnixMilli(m.createdAt), m.data)
	sig, err := Sign(signing, m.eventID, at, body)
	if err != nil {
		return outcome{}, false, err
	}
	// An attempt under way when the node shuts down is finished (within Timeout) and recorded.
	o := d.send(rctx, m.target, m.eventID, at, sig, body)
	o.failing = m.failingSince.Valid
	return o, true, nil
}

// Body is what a delivery of an event sends: {"type", "timestamp", "data"}, with the event's time in
// RFC 3339 and its object as stored, byte for byte. The same event gives the same bytes every time.
func Body(typ string, at time.Time, data string) []byte {
	t, _ := json.Marshal(typ)
	ts, _ := json.Marshal(at.UTC().Format(time.RFC3339Nano))
	b := make([]byte, 0, len(data)+len(t)+len(ts)+32)
	b = append(append(append(b, `{"type":`...), t...), `,"timestamp":`...)
	b = append(append(append(b, ts...), `,"data":`...), data...)
	return append(b, '}')
}

// send posts body to target with the Standard Webhooks headers.
func (d *Deliverer) send(ctx context.Context, target, id string, at time.Time, sig string, body []byte) outcome {
	o := outcome{at: at}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		o.err = "invalid URL: " + err.Error()
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	start := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		o.latency, o.err = time.Since(start), describe(err)
		return o
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, ResponseLimit))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so that the connection can be used again
	resp.Body.Close()
	o.latency, o.status = time.Since(start), resp.StatusCode
	o.response = text(head)
	if err != nil && !o.succeeded() {
		o.err = describe(err)
	}
	o.retryAfter = retryAfter(resp, at)
	return o
}

// text is the start of an answer as the delivery log keeps it, in UTF-8 and without NUL (which
// PostgreSQL's text refuses): a character cut by ResponseLimit is left out, other bytes that are not
// UTF-8 are each shown as U+FFFD.
func text(head []byte) string {
	i := len(head) - 1
	for i > 0 && len(head)-i < utf8.UTFMax && !utf8.RuneStart(head[i]) {
		i--
	}
	if i >= 0 && !utf8.FullRune(head[i:]) {
		head = head[:i]
	}
	return strings.ReplaceAll(strings.ToValidUTF8(string(head), "\uFFFD"), "\x00", "\uFFFD")
}

// describe is the delivery log's words for a failed request: the cause without the request's URL
// around it.
func describe(err error) string {
	var refused *refusedError
	if errors.As(err, &refused) {
		return refused.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Sprintf("no answer within %d s", int(Timeout/time.Second))
		}
		return ue.Err.Error()
	}
	return err.Error()
}

// claimNextSQL leases ($2, until) the next delivery due at $1 for endpoint $3 that no live lease
// holds. FOR UPDATE SKIP LOCKED (PostgreSQL) keeps two workers of one endpoint from waiting on the
// same row.
const claimNextSQL = `UPDATE webhook_deliveries SET lease_until = $2 WHERE id = (SELECT id FROM webhook_deliveries
	WHERE endpoint_id = $3 AND status = 'PENDING' AND next_attempt <= $1 AND (lease_until IS NULL OR lease_until < $1)
	ORDER BY next_attempt, id LIMIT 1%s) AND ` + notDone + ` AND (lease_until IS NULL OR lease_until < $1)
	RETURNING id, endpoint_id, attempts`

// record writes an attempt and what follows from it, in one transaction: the delivery succeeded,
// failed for good, or is due again; the endpoint's health; and, when next, the lease of the next
// delivery due for the same endpoint, which it returns.
func (d *Deliverer) record(ctx context.Context, c claimed, o outcome, next bool) (*claimed, error) {
	ctx = context.WithoutCancel(ctx)
	at := o.at.UnixMilli()
	n := c.attempts + 1
	if next && o.succeeded() && !o.failing && d.cfg.DB.Dialect() == store.Postgres {
		return d.recordSuccess(ctx, c, o)
	}
	var taken *claimed
	err := d.cfg.DB.Write(ctx, func(tx *store.Tx) error {
		taken = nil
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, response, error, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, c.id, o.status, o.latency.Milliseconds(), o.response, o.err, at); err != nil {
			return err
		}
		status, due := "FAILED", at
		switch {
		case o.succeeded():
			status = "SUCCEEDED"
		case o.status == http.StatusGone:
			// "410 disables the endpoint": the receiver says it is gone for good.
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET disabled = TRUE, disabled_reason = $2, updated_at = $3
				WHERE id = $1 AND disabled = FALSE`, c.endpoint, "The endpoint answered 410 Gone on "+o.at.UTC().Format(time.RFC3339)+".", at); err != nil {
				return err
			}
		default:
			if delay, more := retryDelay(n); more {
				status, due = "PENDING", o.at.Add(max(delay, o.retryAfter)).UnixMilli()
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = $2, attempts = $3, next_attempt = $4, lease_until = NULL,
			updated_at = $5 WHERE id = $1 AND `+notDone, c.id, status, n, due, at); err != nil {
			return err
		}
		if err := d.health(ctx, tx, c.endpoint, o); err != nil {
			return err
		}
		if !next {
			return nil
		}
		var t claimed
		err := tx.QueryRowContext(ctx, claimNext[tx.Dialect() == store.Postgres], at, at+d.cfg.Lease.Milliseconds(), c.endpoint).Scan(&t.id, &t.endpoint, &t.attempts)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		// Read here, in the transaction that took it, the next delivery's message costs no read of its own.
		if t.msg, err = load(ctx, tx, t.id); err != nil {
			return err
		}
		taken = &t
		return nil
	})
	return taken, err
}

// recordSuccess is record for the common case on PostgreSQL, a success to an endpoint that was not
// failing: the attempt, the delivery's end and the lease of the endpoint's next due delivery, with its
// message, in one statement — one round trip instead of six. All of a statement's parts see one
// snapshot, in which this delivery is still leased: the next is another.
func (d *Deliverer) recordSuccess(ctx context.Context, c claimed, o outcome) (*claimed, error) {
	at := o.at.UnixMilli()
	t := claimed{msg: &message{}}
	err := d.cfg.DB.QueryRow(ctx, append([]any{&t.id, &t.endpoint, &t.attempts}, t.msg.dest()...), recordSuccessSQL,
		c.id, o.status, o.latency.Milliseconds(), o.response, at, c.attempts+1, at+d.cfg.Lease.Milliseconds(), c.endpoint)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// recordSuccessSQL: $1 the delivery, $2 to $4 the answer's status, latency and text, $5 now, $6 the
// attempts made, $7 the next lease's end, $8 the endpoint.
const recordSuccessSQL = `WITH attempt AS (INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, response, error, created_at)
		VALUES ($1, $2, $3, $4, '', $5)),
	done AS (UPDATE webhook_deliveries SET status = 'SUCCEEDED', attempts = $6, next_attempt = $5, lease_until = NULL, updated_at = $5
		WHERE id = $1 AND ` + notDone + `),
	taken AS (UPDATE webhook_deliveries SET lease_until = $7 WHERE id = (SELECT id FROM webhook_deliveries
		WHERE endpoint_id = $8 AND status = 'PENDING' AND next_attempt <= $5 AND (lease_until IS NULL OR lease_until < $5) AND id <> $1
		ORDER BY next_attempt, id LIMIT 1 FOR UPDATE SKIP LOCKED) AND ` + notDone + ` AND (lease_until IS NULL OR lease_until < $5)
		RETURNING id, endpoint_id, attempts, event_id)
	SELECT taken.id, taken.endpoint_id, taken.attempts, ` + messageColumns + ` FROM taken JOIN events e ON e.id = taken.event_id
		JOIN webhook_endpoints w ON w.id = taken.endpoint_id`

// health keeps the endpoint's failing_since — "set at the first failure after a success, cleared on a
// success" — and disables an endpoint whose deliveries have all failed for DisableAfter, e-mailing its
// merchant through the outbox, once.
func (d *Deliverer) health(ctx context.Context, tx *store.Tx, endpoint int64, o outcome) error {
	at := o.at.UnixMilli()
	if o.succeeded() && !o.failing {
		return nil
	}
	if o.succeeded() {
		_, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL`, endpoint)
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET failing_since = $2 WHERE id = $1 AND failing_since IS NULL`, endpoint, at); err != nil {
		return err
	}
	var merchantID, endpointID, target string
	var since int64
	err := tx.QueryRowContext(ctx, `UPDATE webhook_endpoints SET disabled = TRUE, disabled_reason = $3, updated_at = $2
		WHERE id = $1 AND disabled = FALSE AND failing_since <= $4 RETURNING merchant_id, endpoint_id, url, failing_since`,
		endpoint, at, "Every delivery failed for 5 days.", at-DisableAfter.Milliseconds()).Scan(&merchantID, &endpointID, &target, &since)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	var name, email string
	if err := tx.QueryRowContext(ctx, `SELECT name, email FROM merchants WHERE id = $1`, merchantID).Scan(&name, &email); err != nil {
		return err
	}
	d.cfg.Logger.InfoContext(ctx, "webhook endpoint disabled: every delivery failed for 5 days", "endpoint", endpointID, "merchant", merchantID)
	return billing.Queue(ctx, tx, merchantID, disabledMail(name, email, endpointID, target, time.UnixMilli(since)), o.at)
}

// disabledMail tells a merchant that Kassa disabled one of its endpoints.
func disabledMail(merchant, to, endpointID, target string, since time.Time) billing.Message {
	text := fmt.Sprintf(`Kassa has disabled the webhook endpoint %s of %s:

    %s

Every delivery to it has failed since %s. Kassa sends it nothing more until it is enabled again
(Settings → Webhooks in the dashboard, or PATCH /v1/webhook-endpoints/%s with "disabled": false).
The delivery log of the endpoint shows what its server answered.
`, endpointID, merchant, target, since.UTC().Format("January 2, 2006 15:04 MST"), endpointID)
	return billing.Message{To: to, Subject: "Webhook endpoint disabled: " + target, Text: text,
		HTML: "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Webhook endpoint disabled</title></head><body><pre>" +
			html.EscapeString(text) + "</pre></body></html>\n"}
}
