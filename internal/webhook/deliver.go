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
	"maps"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/store"
)

// What a delivery is allowed: the bounds every merchant's receiver can count on.
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
	// MinLease is the shortest lease of an endpoint: an attempt's Timeout, and 15 s to record it.
	MinLease = Timeout + 15*time.Second
	// UserAgent names Kassa to the merchant's server.
	UserAgent = "Kassa-Webhooks/1.0"
	// BusyRate is how many deliveries a second a node sends at most while it is busy answering
	// payments (Config.Requests); the rest wait until it is not, then go at full speed.
	BusyRate = 100
)

// BusyRequests is how many API requests under way make a node busy: four per processor, a queue of
// requests waiting for the processors rather than one being answered now and then.
var BusyRequests = 4 * runtime.GOMAXPROCS(0)

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
	// RootCAs, when set, are the certificate authorities trusted for endpoints instead of the system's
	// roots: tests' receivers, or the system's roots and the operator's own CAs (RootsWith).
	RootCAs *x509.CertPool
	// Poll is how often due deliveries are looked for (default 500 ms). A worker that has sent a
	// delivery takes the next one due for the same endpoint at once, without waiting for it.
	Poll time.Duration
	// Workers bounds the deliveries this node sends at once, over every endpoint (default 128): it
	// sends to Workers / MaxInFlight endpoints at once.
	Workers int
	// Requests, when set, tells how many API requests the node is answering: while they are
	// BusyRequests or more, the node sends at most BusyRate deliveries a second (payments first).
	Requests func() int
	// Lease is how long a node holds an endpoint it sends to without renewing the lease (default and
	// at least MinLease); it renews it with each batch of outcomes it records. The deliveries a node
	// that died had not recorded are sent again once its lease is over.
	Lease time.Duration
}

// Deliverer sends the deliveries that event.Record queued: each to its endpoint, signed by the
// Standard Webhooks specification, retried on Schedule until it succeeds or fails for good, each
// attempt written to webhook_attempts. Any number of nodes may run one on the same database: a
// delivery is sent by the node that holds its lease.
type Deliverer struct {
	cfg      Config
	client   *http.Client
	runners  int           // how many endpoints this node sends to at once: Workers / inFlight
	inFlight int           // how many deliveries to one endpoint a runner sends at once
	running  atomic.Int32  // runners under way
	busy     *rate.Limiter // paces the deliveries while the node is busy
	wg       sync.WaitGroup
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
	inFlight := min(MaxInFlight, cfg.Workers)
	return &Deliverer{cfg: cfg, client: client, inFlight: inFlight, runners: cfg.Workers / inFlight,
		busy: rate.NewLimiter(BusyRate, MaxInFlight)}
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

// ReleaseAll frees every endpoint's lease: for a node that is the only one on its database (SQLite),
// at start, when no attempt of a previous process can still be under way, so that what it was
// sending when it died is sent at once rather than after its lease.
func (d *Deliverer) ReleaseAll(ctx context.Context) error {
	_, err := d.cfg.DB.Exec(ctx, `UPDATE webhook_endpoints SET lease_owner = NULL, lease_until = NULL WHERE lease_until IS NOT NULL`)
	return err
}

// claimed is a due delivery of an endpoint this node holds the lease of, with what it sends.
type claimed struct {
	id       int64
	attempts int
	ref      derivedRef // the row of a derived event (ledger.go); zero for a row of events
	msg      message
}

// message is what a delivery sends, and to whom: its event, and its endpoint as it stands.
type message struct {
	eventID, typ, data, target string
	createdAt                  int64
	secrets                    SealedSecrets
}

// notDone is the condition of an UPDATE of a delivery by id that applies only while the delivery is
// PENDING, written so that it leaves PostgreSQL nothing to choose but the primary key. The queue's
// partial indexes are WHERE status = 'PENDING', and their statistics are those of the last ANALYZE,
// which usually saw no delivery pending: "status = 'PENDING'" lets the planner scan one of them,
// which it believes holds a row or two, rather than look the id up — and once a backlog builds up it
// walked thousands of entries for each delivery recorded (10 ms each, instead of a tenth of one).
// "NOT IN" the two other statuses says the same and matches no index's predicate.
const notDone = `status NOT IN ('SUCCEEDED', 'FAILED')`

// freeEndpoints is the condition, in dialect, of an endpoint whose deliveries a node may take at $1:
// enabled, its lease free or run out, and a delivery of it due, found through (endpoint_id,
// next_attempt, id), an event queued for it (queue.go), found through the queue's key, or a derived
// event of its merchant after its cursor (ledger.go).
func freeEndpoints(dialect store.Dialect) string {
	return `w.disabled = FALSE AND (w.lease_until IS NULL OR w.lease_until < $1)
	AND (EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = w.id AND d.status = 'PENDING' AND d.next_attempt <= $1)
		OR EXISTS (SELECT 1 FROM webhook_queue q WHERE q.endpoint_id = w.id) OR ` + derivedPending(dialect) + `)`
}

// dueSQL tells, by dialect, whether an endpoint is free with a delivery due at $1: a read, so that a
// poll that finds nothing writes nothing.
var dueSQL = map[store.Dialect]string{
	store.SQLite:   `SELECT 1 FROM webhook_endpoints w WHERE ` + freeEndpoints(store.SQLite) + ` LIMIT 1`,
	store.Postgres: `SELECT 1 FROM webhook_endpoints w WHERE ` + freeEndpoints(store.Postgres) + ` LIMIT 1`,
}

// leaseSQL leases ($2, until $3) up to $4 free endpoints with a delivery due at $1, by dialect. On
// PostgreSQL an endpoint that another node leased meanwhile is re-checked against the outer WHERE
// once that node commits, and skipped.
var leaseSQL = map[store.Dialect]string{
	store.SQLite:   fmt.Sprintf(leaseSQLFormat, freeEndpoints(store.SQLite)),
	store.Postgres: fmt.Sprintf(leaseSQLFormat, freeEndpoints(store.Postgres)),
}

const leaseSQLFormat = `UPDATE webhook_endpoints SET lease_owner = $2, lease_until = $3
	WHERE id IN (SELECT w.id FROM webhook_endpoints w WHERE %s LIMIT $4)
		AND disabled = FALSE AND (lease_until IS NULL OR lease_until < $1)
	RETURNING id`

// dispatch leases as many endpoints with deliveries due as this node has room for, and starts a runner
// for each.
func (d *Deliverer) dispatch(ctx context.Context) error {
	free := d.runners - int(d.running.Load())
	if free <= 0 || ctx.Err() != nil {
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
	var leased []int64
	err := d.cfg.DB.Write(ctx, func(tx *store.Tx) error {
		leased = leased[:0]
		rows, err := tx.QueryContext(ctx, leaseSQL[tx.Dialect()], now, d.cfg.Node, now+d.cfg.Lease.Milliseconds(), free)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			leased = append(leased, id)
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	for _, endpoint := range leased {
		d.running.Add(1)
		d.wg.Go(func() {
			defer d.running.Add(-1)
			d.run(ctx, endpoint)
		})
	}
	return nil
}

// fetchSize is how many due deliveries a runner reads at once, and how many outcomes it records at
// most in one batch.
const fetchSize = 64

// gather is how long a runner lets outcomes gather before it records them, and new deliveries before
// it reads them, while it has attempts under way: a busy endpoint's deliveries are read and recorded
// a few dozen at a time, not one or two: the deliveries are written to the database the sales are.
// Nothing waits for it that a receiver sees.
const gather = 20 * time.Millisecond

// ended is an attempt made, or a delivery not attempted (err) because its endpoint's secret could not
// be opened.
type ended struct {
	c   claimed
	o   outcome
	err error
}

// run sends endpoint's due deliveries while this node holds the endpoint's lease: at most inFlight at
// once, the earliest due first, each attempt's outcome recorded before its delivery leaves the
// runner's hands. The outcomes are recorded in batches, while the next attempts are under way — the
// attempts that ended while one batch was being written make the next — each batch in a transaction
// that also renews the lease; after a failure, nothing more is sent until it is recorded. A lease lost (run out and taken by another node) or an endpoint
// disabled stops the runner once the attempts under way are recorded. When nothing is due, the lease
// is given back; after an error it is left to run out, and what was not recorded is sent again then.
func (d *Deliverer) run(ctx context.Context, endpoint int64) {
	var queue []claimed      // read, not yet sent
	var waiting []ended      // ended, not yet recorded
	held := map[int64]bool{} // read and not yet recorded: queued, in flight, ended or being recorded
	results := make(chan ended, d.inFlight)
	recorded := make(chan recordedBatch, 1)
	inFlight, recording, keep, abandon := 0, false, true, false
	failed := 0 // failures ended and not yet recorded: nothing more is sent until what they lead to (a 410's disabling, say) is
	var firstEnded, lastRead time.Time
	full := true // the last read found as many deliveries as it asked for: more are due
	timer := time.NewTimer(gather)
	defer timer.Stop()
	for {
		idle, justRead := inFlight == 0 && !recording && len(waiting) == 0, false
		if keep && ctx.Err() == nil && len(queue) < d.inFlight && (full || idle || time.Since(lastRead) >= gather) {
			more, err := d.fetch(ctx, endpoint, held)
			if err != nil {
				d.cfg.Logger.WarnContext(ctx, "webhook deliveries not read", "node", d.cfg.Node, "err", err)
				keep = false
			}
			for _, c := range more {
				held[c.id] = true
			}
			queue, full, lastRead, justRead = append(queue, more...), len(more) == fetchSize, time.Now(), true
		}
		for keep && failed == 0 && ctx.Err() == nil && inFlight < d.inFlight && len(queue) > 0 {
			if d.cfg.Requests != nil && d.cfg.Requests() >= BusyRequests {
				// Payments first: a node busy answering them spends little on deliveries, which are
				// not waited for by anyone's checkout; they catch up once it is not.
				if d.busy.Wait(ctx) != nil {
					break
				}
			}
			c := queue[0]
			queue = queue[1:]
			inFlight++
			go func() { results <- d.attempt(ctx, c) }()
		}
		if !recording && len(waiting) > 0 && (len(waiting) >= fetchSize || failed > 0 || inFlight == 0 || !keep || ctx.Err() != nil ||
			time.Since(firstEnded) >= gather) {
			batch := waiting
			waiting, recording = nil, true
			go func() {
				still, err := d.record(ctx, endpoint, batch)
				recorded <- recordedBatch{batch, still, err}
			}()
		}
		if inFlight == 0 && !recording && len(waiting) == 0 && (len(queue) == 0 || !keep || ctx.Err() != nil) {
			if !keep || ctx.Err() != nil || justRead {
				break // the read just made found nothing due
			}
			continue // read again before giving the endpoint back
		}
		// Wake for the next outcome, the end of a batch's writing, or when the outcomes waiting should be
		// written or the queue read again.
		wake := gather
		if len(waiting) > 0 {
			wake = min(wake, gather-time.Since(firstEnded))
		}
		if len(queue) < d.inFlight {
			wake = min(wake, gather-time.Since(lastRead))
		}
		timer.Reset(max(wake, 0))
		select {
		case r := <-results:
			inFlight--
			if r.err != nil {
				// No retry at once of what cannot be signed: the lease is left to run out.
				d.cfg.Logger.WarnContext(ctx, "webhook delivery not sent; it is tried again when the endpoint's lease is over",
					"node", d.cfg.Node, "delivery", r.c.id, "err", r.err)
				delete(held, r.c.id)
				keep, abandon = false, true
				continue
			}
			if len(waiting) == 0 {
				firstEnded = time.Now()
			}
			waiting = append(waiting, r)
			if !r.o.succeeded() {
				failed++
			}
		case b := <-recorded:
			recording = false
			for _, r := range b.batch {
				delete(held, r.c.id)
				if !r.o.succeeded() {
					failed--
				}
			}
			if b.err != nil {
				d.cfg.Logger.WarnContext(ctx, "webhook deliveries not recorded; they are sent again when the endpoint's lease is over",
					"node", d.cfg.Node, "endpoint", endpoint, "err", b.err)
				keep, abandon = false, true
			}
			keep = keep && b.still
		case <-timer.C:
		}
	}
	if abandon {
		return
	}
	if _, err := d.cfg.DB.Exec(context.WithoutCancel(ctx), `UPDATE webhook_endpoints SET lease_owner = NULL, lease_until = NULL
		WHERE id = $1 AND lease_owner = $2`, endpoint, d.cfg.Node); err != nil {
		d.cfg.Logger.WarnContext(ctx, "webhook endpoint's lease not given back; it runs out", "node", d.cfg.Node, "endpoint", endpoint, "err", err)
	}
}

// recordedBatch is what record made of a batch.
type recordedBatch struct {
	batch []ended
	still bool
	err   error
}

// fetchSQL reads up to $3 deliveries of endpoint $1 due at $2, the earliest first, with their
// messages, but for those the runner holds ($4), by dialect: a JSON array for SQLite, an array for
// PostgreSQL.
var fetchSQL = map[store.Dialect]string{
	store.SQLite:   fmt.Sprintf(fetchSQLFormat, `d.id NOT IN (SELECT value FROM json_each($4))`),
	store.Postgres: fmt.Sprintf(fetchSQLFormat, `d.id <> ALL($4::BIGINT[])`),
}

var fetchSQLFormat = `SELECT d.id, d.attempts, ` + derivedRefColumns() + `, COALESCE(e.event_id, ''), COALESCE(e.type, ''),
		COALESCE(e.data, ''), COALESCE(e.created_at, 0), w.endpoint_id, w.url, w.secret, w.previous_secret, w.previous_until
	FROM webhook_deliveries d LEFT JOIN events e ON e.id = d.event_id JOIN webhook_endpoints w ON w.id = d.endpoint_id
	WHERE d.endpoint_id = $1 AND d.status = 'PENDING' AND d.next_attempt <= $2 AND %s
	ORDER BY d.next_attempt, d.id LIMIT $3`

// fetch reads up to fetchSize of endpoint's due deliveries that the runner does not hold; when fewer
// are due, it makes as many of the events queued for the endpoint (promote) and of the derived events
// after its cursors (promoteDerived) deliveries, and reads them too.
func (d *Deliverer) fetch(ctx context.Context, endpoint int64, held map[int64]bool) ([]claimed, error) {
	out, err := d.readDue(ctx, endpoint, held, nil)
	if err != nil || len(out) == fetchSize {
		return out, err
	}
	n, err := d.promote(ctx, endpoint, fetchSize-len(out))
	if err != nil {
		return out, err
	}
	m, err := d.promoteDerived(ctx, endpoint, fetchSize-len(out))
	if err != nil || n+m == 0 {
		return out, err
	}
	return d.readDue(ctx, endpoint, held, out)
}

// readDue reads up to fetchSize of endpoint's due deliveries, the earliest first, but for those held
// and those of read, and returns them after read.
func (d *Deliverer) readDue(ctx context.Context, endpoint int64, held map[int64]bool, read []claimed) ([]claimed, error) {
	ids := make([]int64, 0, len(held)+len(read))
	for id := range held {
		ids = append(ids, id)
	}
	for _, c := range read {
		ids = append(ids, c.id)
	}
	exclude := idList(d.cfg.DB.Dialect(), ids)
	var out []claimed
	err := d.cfg.DB.Read(ctx, func(q store.Querier) error {
		out = append(out[:0], read...)
		rows, err := q.QueryContext(ctx, fetchSQL[d.cfg.DB.Dialect()], endpoint, d.cfg.Now().UnixMilli(), fetchSize-len(read), exclude)
		if err != nil {
			return err
		}
		defer rows.Close()
		var refs []derivedRef
		for rows.Next() {
			var c claimed
			m := &c.msg
			r := newScanRefs()
			if err := rows.Scan(append(append([]any{&c.id, &c.attempts}, r.dest()...), &m.eventID, &m.typ, &m.data, &m.createdAt,
				&m.secrets.EndpointID, &m.target, &m.secrets.Secret, &m.secrets.Previous, &m.secrets.PreviousUntil)...); err != nil {
				return err
			}
			if c.ref = r.ref(); c.ref.id != 0 {
				refs = append(refs, c.ref)
			}
			out = append(out, c)
		}
		if err := rows.Close(); err != nil || len(refs) == 0 {
			return err
		}
		derived, err := derivedEvents(ctx, q, refs)
		if err != nil {
			return err
		}
		for i := len(read); i < len(out); i++ {
			if c := &out[i]; c.ref.id != 0 {
				e, ok := derived[c.ref]
				if !ok {
					return fmt.Errorf("webhook: delivery %s: no event of row %d of source %d", DeliveryID(c.id), c.ref.id, c.ref.source)
				}
				c.msg.eventID, c.msg.typ, c.msg.data, c.msg.createdAt = e.ID, e.Type, string(e.Data), e.CreatedAt.UnixMilli()
			}
		}
		return nil
	})
	return out, err
}

// Backlog counts the deliveries neither succeeded nor failed for good, through the index of pending
// deliveries, the events queued for an endpoint and not yet made deliveries, and the derived events
// after each enabled endpoint's cursors (ledger.go), whatever their types: those it is not subscribed
// to are still to be read and passed over.
func Backlog(ctx context.Context, db *store.DB) (int, error) {
	var n int
	err := db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, backlogSQL).Scan(&n)
	})
	return n, err
}

// backlogSQL is Backlog's count.
var backlogSQL = func() string {
	q := `SELECT (SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'PENDING') + (SELECT COUNT(*) FROM webhook_queue)`
	for _, s := range derivedSources {
		q += ` + (SELECT COUNT(*) FROM webhook_endpoints w JOIN ` + s.table + ` t ON t.merchant_id = w.merchant_id
			AND t.event_seq >= w.` + s.seq + ` AND (t.event_seq > w.` + s.seq + ` OR t.id > w.` + s.id + `) WHERE w.disabled = FALSE)`
	}
	return q
}()

// outcome is what one attempt came to.
type outcome struct {
	at         time.Time     // when it was made (Now)
	status     int           // the HTTP status, 0 when there was no answer
	latency    time.Duration // from the request to the end of the answer read
	response   string        // the first ResponseLimit bytes of the answer
	headers    string        // the answer's headers, "Name: value" lines, the first ResponseLimit bytes
	signature  string        // the webhook-signature header sent
	err        string        // why there was no answer, or it was not read: one of failures
	retryAfter time.Duration // how long the answer asked to be left alone
}

func (o outcome) succeeded() bool { return o.status >= 200 && o.status < 300 }

// attempt sends a delivery once. It reports sent false, with nothing sent, when its endpoint's
// secret could not be opened.
func (d *Deliverer) attempt(ctx context.Context, c claimed) ended {
	m := c.msg
	at := d.cfg.Now()
	signing, err := m.secrets.SigningSecrets(d.cfg.Keyring, at)
	if err != nil {
		return ended{c: c, err: err}
	}
	body := Body(m.typ, time.UnixMilli(m.createdAt), m.data)
	sig, err := Sign(signing, m.eventID, at, body)
	if err != nil {
		return ended{c: c, err: err}
	}
	// An attempt under way when the node shuts down is finished (within Timeout) and recorded.
	o, cause := d.send(context.WithoutCancel(ctx), m.target, m.eventID, at, sig, body)
	o.signature = sig
	if cause != nil {
		// The delivery log has o.err, a phrase; the operator's log has the error, which may name
		// addresses of the operator's network. A refused address may be a merchant probing it.
		level := slog.LevelInfo
		if o.err == failNotAllowed {
			level = slog.LevelWarn
		}
		d.cfg.Logger.Log(ctx, level, "webhook attempt failed", "node", d.cfg.Node, "endpoint", m.secrets.EndpointID,
			"delivery", DeliveryID(c.id), "attempt", c.attempts+1, "status", o.status, "result", o.err, "err", cause)
	}
	return ended{c: c, o: o}
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

// send posts body to target with the Standard Webhooks headers. When there was no answer, or it could
// not be read, it returns the error beside the outcome, whose err says what it amounts to.
func (d *Deliverer) send(ctx context.Context, target, id string, at time.Time, sig string, body []byte) (outcome, error) {
	o := outcome{at: at}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		o.err = failURL
		return o, err
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
		return o, err
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, ResponseLimit))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so that the connection can be used again
	resp.Body.Close()
	o.latency, o.status = time.Since(start), resp.StatusCode
	o.response, o.headers = text(head), headerLines(resp.Header)
	o.retryAfter = retryAfter(resp, at)
	if err != nil && !o.succeeded() {
		o.err = describe(err)
		return o, err
	}
	return o, nil
}

// headerLines is an answer's headers as the delivery log keeps them: "Name: value" lines in the order
// of their names, a header sent twice on a line each, at most ResponseLimit bytes of them (text).
func headerLines(h http.Header) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			b.WriteString(name + ": " + v + "\n")
			if b.Len() > ResponseLimit {
				return text([]byte(b.String())[:ResponseLimit])
			}
		}
	}
	return text([]byte(b.String()))
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

// What the delivery log (the API's and the dashboard's) says of an attempt that got no answer, or
// an answer that could not be read: one of these phrases, never the error. The error can name what
// lies inside the operator's network — the address refused, the resolver asked — so it goes to the
// operator's log only, with the endpoint, the delivery and the attempt. An answer read is shown by
// its status code ("HTTP 500"), beside an empty error.
const (
	failNotAllowed = "target not allowed"   // the address dialed is not public (ssrf.go)
	failConnect    = "could not connect"    // the name did not resolve, or no connection was made
	failTimeout    = "timed out"            // no whole answer within Timeout
	failTLS        = "TLS handshake failed" // the certificate was not trusted, or TLS could not be agreed
	failAnswer     = "no valid answer"      // the connection was lost, or what came back was not HTTP
	failURL        = "invalid URL"          // the endpoint's URL cannot be requested
)

// failures are all the phrases, in the order the documentation lists them.
var failures = []string{failNotAllowed, failConnect, failTimeout, failTLS, failAnswer, failURL}

// describe is the phrase a failed request comes to, by the error's kind, not its words. The checks go
// from the first step of a request to the last, so that a failure is named by the step that failed:
// a lookup that timed out is a failure to connect, not a time-out.
func describe(err error) string {
	var refused *refusedError
	var lookup *net.DNSError
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.As(err, &refused):
		return failNotAllowed
	case errors.As(err, &lookup):
		return failConnect
	case errors.As(err, &ne) && ne.Timeout():
		return failTimeout
	case tlsFailure(err):
		return failTLS
	case errors.As(err, &op) && op.Op == "dial":
		return failConnect
	}
	return failAnswer
}

// tlsFailure reports whether err is the TLS handshake's: a certificate not trusted or not the
// host's, an alert from the server, or an answer that is not TLS.
func tlsFailure(err error) bool {
	var verify *tls.CertificateVerificationError
	var alert tls.AlertError
	var record tls.RecordHeaderError
	return errors.As(err, &verify) || errors.As(err, &alert) || errors.As(err, &record)
}

// record writes a batch of outcomes of endpoint's deliveries, and what follows from each — the
// delivery succeeded, failed for good, or is due again; the endpoint's health — with the renewal of
// the endpoint's lease, in one transaction. It reports whether the runner may go on: the lease is
// still this node's and the endpoint enabled.
func (d *Deliverer) record(ctx context.Context, endpoint int64, batch []ended) (bool, error) {
	ctx = context.WithoutCancel(ctx)
	now := d.cfg.Now().UnixMilli()
	until := now + d.cfg.Lease.Milliseconds()
	succeeded := true
	for _, r := range batch {
		d.cfg.Metrics.WebhookAttempt(r.o.status)
		succeeded = succeeded && r.o.succeeded()
	}
	if succeeded && d.cfg.DB.Dialect() == store.Postgres {
		return d.recordSuccesses(ctx, endpoint, batch, until)
	}
	var still bool
	err := d.cfg.DB.Write(ctx, func(tx *store.Tx) error {
		for _, r := range batch {
			if err := d.recordOne(ctx, tx, endpoint, r); err != nil {
				return err
			}
		}
		return tx.QueryRowContext(ctx, `UPDATE webhook_endpoints SET lease_until = $2 WHERE id = $1 AND lease_owner = $3
			RETURNING NOT disabled`, endpoint, until, d.cfg.Node).Scan(&still)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return still, err
}

// recordOne writes one attempt of a delivery of endpoint and what follows from it.
func (d *Deliverer) recordOne(ctx context.Context, tx *store.Tx, endpoint int64, r ended) error {
	o, at, n := r.o, r.o.at.UnixMilli(), r.c.attempts+1
	if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, response, error, created_at,
		signature, response_headers) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		r.c.id, o.status, o.latency.Milliseconds(), o.response, o.err, at, o.signature, o.headers); err != nil {
		return err
	}
	status, due := "FAILED", at
	switch {
	case o.succeeded():
		status = "SUCCEEDED"
	case o.status == http.StatusGone:
		// "410 disables the endpoint": the receiver says it is gone for good.
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET disabled = TRUE, disabled_reason = $2, updated_at = $3
			WHERE id = $1 AND disabled = FALSE`, endpoint, "The endpoint answered 410 Gone on "+o.at.UTC().Format(time.RFC3339)+".", at); err != nil {
			return err
		}
	default:
		if delay, more := retryDelay(n); more {
			status, due = "PENDING", o.at.Add(max(delay, o.retryAfter)).UnixMilli()
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = $2, attempts = $3, next_attempt = $4, updated_at = $5
		WHERE id = $1 AND `+notDone, r.c.id, status, n, due, at); err != nil {
		return err
	}
	return d.health(ctx, tx, endpoint, o)
}

// recordSuccesses is record for the common case on PostgreSQL, a batch of successes: the attempts,
// the deliveries' end, the endpoint's health and its lease's renewal in one statement, sent through
// the statement batcher with the sales' — one round trip for the batch.
func (d *Deliverer) recordSuccesses(ctx context.Context, endpoint int64, batch []ended, until int64) (bool, error) {
	ids, statuses, latencies, responses, ats, attempts :=
		make([]int64, len(batch)), make([]int32, len(batch)), make([]int64, len(batch)), make([]string, len(batch)), make([]int64, len(batch)), make([]int32, len(batch))
	signatures, headers := make([]string, len(batch)), make([]string, len(batch))
	for i, r := range batch {
		ids[i], statuses[i], latencies[i], responses[i] = r.c.id, int32(r.o.status), r.o.latency.Milliseconds(), r.o.response
		ats[i], attempts[i], signatures[i], headers[i] = r.o.at.UnixMilli(), int32(r.c.attempts+1), r.o.signature, r.o.headers
	}
	var still bool
	err := d.cfg.DB.QueryRow(ctx, []any{&still}, recordSuccessesSQL, ids, statuses, latencies, responses, ats, attempts,
		endpoint, until, d.cfg.Node, signatures, headers)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return still, err
}

// recordSuccessesSQL: $1 to $6 the deliveries, their answers' status, latency and text, the times
// of their attempts and the attempts made, as arrays; $7 the endpoint, $8 the lease's new end, $9
// this node; $10 and $11 the signatures sent and the answers' headers, as arrays. A success clears the endpoint's failing_since — "set at the first failure after
// a success, cleared on a success" — with the lease's renewal, one update of the endpoint's row.
const recordSuccessesSQL = `WITH o AS (SELECT * FROM unnest($1::BIGINT[], $2::INT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], $6::INT[],
		$10::TEXT[], $11::TEXT[]) AS o (id, status, latency, response, at, attempts, signature, headers)),
	attempt AS (INSERT INTO webhook_attempts (delivery_id, status_code, latency_ms, response, error, created_at, signature, response_headers)
		SELECT id, status, latency, response, '', at, signature, headers FROM o),
	done AS (UPDATE webhook_deliveries d SET status = 'SUCCEEDED', attempts = o.attempts, next_attempt = o.at, updated_at = o.at
		FROM o WHERE d.id = o.id AND d.` + notDone + `)
	UPDATE webhook_endpoints SET failing_since = NULL,
		lease_until = CASE WHEN lease_owner = $9 THEN $8 ELSE lease_until END
	WHERE id = $7 RETURNING lease_owner IS NOT DISTINCT FROM $9 AND NOT disabled`

// health keeps the endpoint's failing_since — "set at the first failure after a success, cleared on a
// success" — and disables an endpoint whose deliveries have all failed for DisableAfter, e-mailing its
// merchant through the outbox, once.
func (d *Deliverer) health(ctx context.Context, tx *store.Tx, endpoint int64, o outcome) error {
	at := o.at.UnixMilli()
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
	return billing.Message{Kind: billing.KindWebhookNotice, To: to, Subject: "Webhook endpoint disabled: " + target, Text: text,
		HTML: "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Webhook endpoint disabled</title></head><body><pre>" +
			html.EscapeString(text) + "</pre></body></html>\n"}
}
