// Package metrics is Kassa's Prometheus exposition: the series each part of the
// server reports, on a registry of their own, which `kassa serve --metrics-addr` serves on a listener
// of its own, away from the API.
//
// A *Set is nil when metrics are off, and every method of a nil *Set does nothing, so that the parts
// that report call it unconditionally. Counters and histograms are updated where the thing happens
// (a request, a payment, a processor call); what the database holds (pending attempts, backlogs,
// subscriptions by state) is read when Prometheus scrapes, by the State function the server gives
// Observe.
package metrics

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Set is the registry and every series Kassa updates as it works.
type Set struct {
	reg   *prometheus.Registry
	names []string

	requests     *prometheus.HistogramVec
	payments     *prometheus.CounterVec
	calls        *prometheus.HistogramVec
	recovered    prometheus.Counter
	replays      *prometheus.CounterVec
	tokens       *prometheus.CounterVec
	limited      *prometheus.CounterVec
	charges      *prometheus.CounterVec
	mails        *prometheus.CounterVec
	webhooks     *prometheus.CounterVec
	writeBatches *prometheus.HistogramVec
	state        *stateCollector
	conn         *connectionCollector
}

// latencyBuckets, in seconds, span a token check answered from memory (well under a millisecond) to a
// processor call that runs into its 30-second bound.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// New returns a Set with every series registered, beside Go's runtime and the process's own series.
func New() *Set {
	s := &Set{reg: prometheus.NewRegistry()}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.names = append(s.names, "go_goroutines", "go_memstats_heap_inuse_bytes", "go_gc_duration_seconds",
		"process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds")
	s.requests = histogramVec(s, "kassa_http_request_duration_seconds",
		"HTTP requests by route (method and pattern; \"unmatched\" for none) and status code, and how long they took.",
		latencyBuckets, "route", "code")
	s.payments = counterVec(s, "kassa_payments_total",
		"Card operations whose outcome was recorded, by kind (SALE, AUTHORIZATION, CAPTURE, REFUND, VOID), result, decline code, processor and mode (live or test).",
		"kind", "result", "decline_code", "processor", "mode")
	s.calls = histogramVec(s, "kassa_processor_call_duration_seconds",
		"Calls to a processor by processor, operation and outcome (answered, or no_answer: an error or a timeout), and how long they took.",
		latencyBuckets, "processor", "operation", "outcome")
	s.recovered = counterVec(s, "kassa_attempts_recovered_total",
		"Attempts left pending by an interrupted request or a crashed node whose outcome recovery settled.").WithLabelValues()
	s.replays = counterVec(s, "kassa_idempotent_replays_total",
		"Responses replayed for a retried Idempotency-Key instead of running the request again, by route.", "route")
	s.tokens = counterVec(s, "kassa_tokens_issued_total", "Access tokens issued, by grant type.", "grant_type")
	s.limited = counterVec(s, "kassa_rate_limited_total", "Requests refused with 429 by a rate limit, by the limit's policy name.", "policy")
	s.charges = counterVec(s, "kassa_billing_charges_total",
		"Subscription cycles the billing engine charged, by result (approved or declined).", "result")
	s.mails = counterVec(s, "kassa_outbox_sends_total",
		"E-mails of the outbox handed to the SMTP server, by result (sent, or failed: retried later).", "result")
	s.webhooks = counterVec(s, "kassa_webhook_attempts_total",
		"Webhook delivery attempts, by result (succeeded: a 2xx; http_error: another status; no_answer).", "result")
	s.writeBatches = histogramVec(s, "kassa_db_write_batch_size",
		"Writes committed together: the SQLite group commit's transactions, or PostgreSQL's batched statements, per round trip.",
		[]float64{1, 2, 4, 8, 16, 32, 64, 128, 256}, "backend")
	s.state = &stateCollector{
		pending:  s.desc("kassa_attempts_pending", "Card operations recorded and sent to the processor whose outcome is not recorded yet."),
		billing:  s.desc("kassa_billing_subscriptions", "Subscriptions the billing engine has work for, by state: due (next run has come), retrying, suspended.", "state"),
		outbox:   s.desc("kassa_outbox_backlog", "E-mails (receipts, staff links, notices) waiting in the outbox."),
		webhooks: s.desc("kassa_webhook_backlog", "Webhook deliveries not yet succeeded or failed for good."),
		inUse:    s.desc("kassa_db_connections_in_use", "Database connections in use, by pool.", "pool"),
		idle:     s.desc("kassa_db_connections_idle", "Idle database connections, by pool.", "pool"),
		waits:    s.desc("kassa_db_wait_total", "Times a query waited for a free connection, by pool.", "pool"),
		waited:   s.desc("kassa_db_wait_seconds_total", "Time spent waiting for a free connection, by pool.", "pool"),
	}
	s.conn = &connectionCollector{
		reconnects: s.desc("kassa_db_reconnects_total", "Times a PostgreSQL primary answered again after none did (a failover, a restart, a network cut), found by a write or the readiness check."),
		opened:     s.desc("kassa_db_connections_opened_total", "PostgreSQL connections opened, the first ones included."),
		down:       s.desc("kassa_db_primary_unavailable_seconds_total", "Time during which no PostgreSQL primary answered writes or the readiness check, the outage going on included."),
		up:         s.desc("kassa_db_primary_available", "1 while the database answers (a PostgreSQL primary, or SQLite), 0 while writes or the readiness check find no primary."),
	}
	return s
}

// counterVec registers a counter of s by labels.
func counterVec(s *Set, name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	s.reg.MustRegister(c)
	s.names = append(s.names, name)
	return c
}

// histogramVec registers a histogram of s by labels.
func histogramVec(s *Set, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	s.reg.MustRegister(h)
	s.names = append(s.names, name)
	return h
}

// desc describes a series of s read at scrape time.
func (s *Set) desc(name, help string, labels ...string) *prometheus.Desc {
	s.names = append(s.names, name)
	return prometheus.NewDesc(name, help, labels, nil)
}

// Names are the series of s, those read at scrape time included: what a dashboard may refer to.
func (s *Set) Names() []string { return append([]string(nil), s.names...) }

// Handler serves the exposition. A series that cannot be read (the database not answering) is left
// out and logged; the others are served.
func (s *Set) Handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), Timeout: 10 * time.Second})
}

// Request counts one HTTP request to route (a ServeMux pattern, "" when none matched) answered with
// status after d, and what its headers say: a replay of an idempotent response, a rate-limit refusal.
func (s *Set) Request(route string, status int, d time.Duration, h http.Header) {
	if s == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	if status == 0 {
		status = http.StatusOK // a handler that wrote nothing: net/http answers 200
	}
	s.requests.WithLabelValues(route, strconv.Itoa(status)).Observe(d.Seconds())
	if h.Get("Idempotent-Replayed") == "true" {
		s.replays.WithLabelValues(route).Inc()
	}
	if status == http.StatusTooManyRequests {
		s.limited.WithLabelValues(policy(h.Get("RateLimit-Policy"))).Inc()
	}
}

// policy is the name in a RateLimit-Policy field, `"name";q=…;w=…`, or "unknown".
func policy(field string) string {
	if len(field) < 2 || field[0] != '"' {
		return "unknown"
	}
	for i := 1; i < len(field); i++ {
		if field[i] == '"' {
			return field[1:i]
		}
	}
	return "unknown"
}

// Payment counts a card operation whose outcome was recorded.
func (s *Set) Payment(kind, result, declineCode, processor string, test bool) {
	if s == nil {
		return
	}
	mode := "live"
	if test {
		mode = "test"
	}
	s.payments.WithLabelValues(kind, result, declineCode, processor, mode).Inc()
}

// ProcessorCall records one call to a processor that took d; answered is false for an error or a
// timeout.
func (s *Set) ProcessorCall(processor, operation string, answered bool, d time.Duration) {
	if s == nil {
		return
	}
	outcome := "answered"
	if !answered {
		outcome = "no_answer"
	}
	s.calls.WithLabelValues(processor, operation, outcome).Observe(d.Seconds())
}

// Recovered counts an attempt whose outcome recovery settled.
func (s *Set) Recovered() {
	if s != nil {
		s.recovered.Inc()
	}
}

// TokenIssued counts an access token issued under grant.
func (s *Set) TokenIssued(grant string) {
	if s != nil {
		s.tokens.WithLabelValues(grant).Inc()
	}
}

// BillingCharge counts a subscription cycle charged by the billing engine.
func (s *Set) BillingCharge(approved bool) {
	if s != nil {
		s.charges.WithLabelValues(map[bool]string{true: "approved", false: "declined"}[approved]).Inc()
	}
}

// MailSent counts an e-mail of the outbox handed over, or not, to the SMTP server.
func (s *Set) MailSent(ok bool) {
	if s != nil {
		s.mails.WithLabelValues(map[bool]string{true: "sent", false: "failed"}[ok]).Inc()
	}
}

// WebhookAttempt counts a webhook delivery attempt that got status (0: no answer).
func (s *Set) WebhookAttempt(status int) {
	if s == nil {
		return
	}
	result := "http_error"
	switch {
	case status == 0:
		result = "no_answer"
	case status >= 200 && status < 300:
		result = "succeeded"
	}
	s.webhooks.WithLabelValues(result).Inc()
}

// WriteBatch records n writes committed together on backend ("sqlite" or "postgres").
func (s *Set) WriteBatch(backend string, n int) {
	if s != nil {
		s.writeBatches.WithLabelValues(backend).Observe(float64(n))
	}
}

// State is what the database holds that the exposition reports, read at scrape time.
type State struct {
	PendingAttempts int // attempts whose outcome is not recorded yet
	BillingDue      int // ACTIVE or RETRY subscriptions whose next run has come
	BillingRetrying int // subscriptions in RETRY
	Suspended       int // subscriptions SUSPENDED
	OutboxBacklog   int // e-mails not sent yet
	WebhookBacklog  int // webhook deliveries neither succeeded nor failed for good
	// Pools are the database connection pools by name ("write", "read").
	Pools map[string]sql.DBStats
}

// Observe has s read state at every scrape, bounded by timeout.
func (s *Set) Observe(timeout time.Duration, state func(context.Context) (State, error)) {
	if s == nil {
		return
	}
	s.state.timeout, s.state.read = timeout, state
	s.reg.MustRegister(s.state)
}

// stateCollector reads State when scraped.
type stateCollector struct {
	timeout                                                        time.Duration
	read                                                           func(context.Context) (State, error)
	pending, billing, outbox, webhooks, inUse, idle, waits, waited *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.billing, c.outbox, c.webhooks, c.inUse, c.idle, c.waits, c.waited} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.pending, err)
		return
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(c.pending, st.PendingAttempts)
	gauge(c.billing, st.BillingDue, "due")
	gauge(c.billing, st.BillingRetrying, "retrying")
	gauge(c.billing, st.Suspended, "suspended")
	gauge(c.outbox, st.OutboxBacklog)
	gauge(c.webhooks, st.WebhookBacklog)
	for pool, p := range st.Pools {
		gauge(c.inUse, p.InUse, pool)
		gauge(c.idle, p.Idle, pool)
		ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(p.WaitCount), pool)
		ch <- prometheus.MustNewConstMetric(c.waited, prometheus.CounterValue, p.WaitDuration.Seconds(), pool)
	}
}

// Connection is how the server's connection to its database has fared (store.DB.Health).
type Connection struct {
	Reconnects  int64         // times a primary answered again after none did
	Opened      int64         // connections opened
	Unavailable time.Duration // time during which no primary answered
	Available   bool          // a primary answers now
}

// Connection has s report, at every scrape, how the connection to the database has fared, as read by
// health (SQLite's has zeros and Available): reported apart from State, so that it is there while the
// database does not answer.
func (s *Set) Connection(health func() Connection) {
	if s == nil {
		return
	}
	s.conn.read = health
	s.reg.MustRegister(s.conn)
}

// connectionCollector reads Connection when scraped.
type connectionCollector struct {
	read                         func() Connection
	reconnects, opened, down, up *prometheus.Desc
}

func (c *connectionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.reconnects, c.opened, c.down, c.up} {
		ch <- d
	}
}

func (c *connectionCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.read()
	up := 0.0
	if h.Available {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.reconnects, prometheus.CounterValue, float64(h.Reconnects))
	ch <- prometheus.MustNewConstMetric(c.opened, prometheus.CounterValue, float64(h.Opened))
	ch <- prometheus.MustNewConstMetric(c.down, prometheus.CounterValue, h.Unavailable.Seconds())
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}
