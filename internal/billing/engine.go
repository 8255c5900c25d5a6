// Package billing runs subscriptions: an engine inside "kassa serve" charges each cycle when it falls
// due, exactly once, retries declines on a schedule, and sends receipts through a durable outbox.
//
// Exactly once: a worker takes a due subscription with a row lease (a conditional UPDATE, so that any
// number of nodes can share one PostgreSQL database), and charges through the payments core with an
// idempotency key derived from the subscription, the cycle and the attempt. A worker that dies after
// charging leaves the lease to expire; the next worker derives the same key, and the ledger answers
// with the charge already made instead of charging again. One that dies while the processor is
// being asked leaves a pending attempt that ledger recovery resolves; the next worker finds it
// resolved with nothing charged and charges the cycle under the next key.
package billing

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/metrics"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/plan"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
)

// Defaults of Config.
var (
	DefaultRetrySchedule = []time.Duration{24 * time.Hour, 72 * time.Hour, 120 * time.Hour}
)

const (
	DefaultInterval     = time.Minute
	DefaultBacklogLimit = 3
	DefaultLease        = 5 * time.Minute
)

// Config configures an Engine.
type Config struct {
	DB     *store.DB
	Vault  *vault.Service
	Logger *slog.Logger
	Now    func() time.Time
	// Node names this worker in leases (default random).
	Node string
	// Interval is how often the engine looks for due subscriptions and receipts (default 1 min).
	Interval time.Duration
	// RetrySchedule is when a declined cycle is retried, counted from its first decline (default 1, 3
	// and 5 days). When the retries are exhausted the subscription is SUSPENDED.
	RetrySchedule []time.Duration
	// BacklogLimit is how many past-due cycles of one subscription are charged after downtime; older
	// ones are recorded as missed (default 3).
	BacklogLimit int
	// Lease is how long a worker holds a subscription or a receipt (default 5 min); it must outlast a
	// processor call.
	Lease time.Duration
	// Mailer sends receipts; without one they wait in the outbox.
	Mailer *Mailer
	// PublicURL is Kassa's public URL, under which a receipt links the merchant's logo ("": none).
	PublicURL string
	// Demo: without a Mailer, e-mails do not wait in the outbox but are recorded as not sent (demo
	// mode), emptied as a sent one is; the merchant's log of its e-mails (Mails) shows them with
	// their preview. kassa serve --demo sets it when no SMTP server is configured.
	Demo bool
	// Metrics counts the cycles charged and the e-mails sent (nil: not counted).
	Metrics *metrics.Set
	// Tasks are more work of the scheduler, done by each run after the charges: the invoices' due
	// dates and reminders (invoice.Service.RunDue).
	Tasks []Task
}

// Task is scheduled work that the engine does at each run, given the engine's clock's now. Every node
// that runs an engine runs it, at once with the others: it must take each piece of its work once
// itself, as the engine takes a subscription's cycle, and leave what failed to the next run.
type Task func(ctx context.Context, now time.Time) error

// Engine bills subscriptions.
type Engine struct {
	db       *store.DB
	vault    *vault.Service
	log      *slog.Logger
	now      func() time.Time
	node     string
	interval time.Duration
	retries  []time.Duration
	backlog  int
	lease    time.Duration
	mailer   *Mailer
	demo     bool
	metrics  *metrics.Set
	tasks    []Task
	base     string // Config.PublicURL
	wake     chan struct{}
	// unsentWarned is when this engine last warned that e-mails wait for want of SMTP (Unix ns).
	unsentWarned atomic.Int64
}

// New returns an Engine.
func New(cfg Config) *Engine {
	e := &Engine{db: cfg.DB, vault: cfg.Vault, log: cfg.Logger, now: cfg.Now, node: cfg.Node,
		interval: cfg.Interval, retries: cfg.RetrySchedule, backlog: cfg.BacklogLimit, lease: cfg.Lease, mailer: cfg.Mailer, demo: cfg.Demo,
		metrics: cfg.Metrics, tasks: cfg.Tasks, base: cfg.PublicURL, wake: make(chan struct{}, 1)}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.node == "" {
		e.node = "node-" + rand.Text()[:8]
	}
	if e.interval <= 0 {
		e.interval = DefaultInterval
	}
	if e.retries == nil {
		e.retries = DefaultRetrySchedule
	}
	if e.backlog <= 0 {
		e.backlog = DefaultBacklogLimit
	}
	if e.lease <= 0 {
		e.lease = DefaultLease
	}
	return e
}

// Kick makes the engine look for due subscriptions now rather than at its next tick.
func (e *Engine) Kick() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Run bills and sends receipts every interval, and when kicked, until ctx is done.
func (e *Engine) Run(ctx context.Context) {
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for {
		if _, err := e.RunOnce(ctx); err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "billing", "err", err)
		}
		if _, err := e.Deliver(ctx); err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "deliver receipts", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.wake:
		}
	}
}

// RunOnce charges every cycle due now, then does the engine's tasks (Config.Tasks), and returns how
// many charges it attempted. A subscription several cycles behind is charged once per cycle (up to
// the backlog limit), one after another.
func (e *Engine) RunOnce(ctx context.Context) (int, error) {
	attempted, err := e.bill(ctx)
	for _, task := range e.tasks {
		err = errors.Join(err, task(ctx, e.now()))
	}
	return attempted, err
}

// bill charges every cycle due now, and returns how many charges it attempted.
func (e *Engine) bill(ctx context.Context) (int, error) {
	attempted := 0
	deferred := map[int64]bool{} // waiting for an earlier attempt to be resolved: not again this run
	for {
		ids, err := e.dueIDs(ctx)
		if err != nil {
			return attempted, err
		}
		progress := false
		for _, id := range ids {
			if deferred[id] {
				continue
			}
			claimed, err := e.claim(ctx, id)
			if err != nil {
				return attempted, err
			}
			if !claimed {
				continue
			}
			done, err := e.process(ctx, id)
			if err != nil {
				e.release(ctx, id)
				e.log.WarnContext(ctx, "billing: charge not made, will retry", "subscription_id", id, "err", err)
				deferred[id] = true
				continue
			}
			if !done {
				deferred[id] = true
				continue
			}
			attempted++
			progress = true
		}
		if !progress {
			return attempted, nil
		}
	}
}

// dueIDs lists subscriptions due now that no live lease holds.
func (e *Engine) dueIDs(ctx context.Context) ([]int64, error) {
	now := e.now().UnixMilli()
	var ids []int64
	err := e.db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT id FROM subscriptions WHERE next_run IS NOT NULL AND next_run <= $1
			AND status IN ('ACTIVE', 'RETRY') AND (lease_until IS NULL OR lease_until < $1) ORDER BY next_run LIMIT 200`, now)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	return ids, err
}

// claim takes the lease of a due subscription; false when another worker got it first.
func (e *Engine) claim(ctx context.Context, id int64) (bool, error) {
	now := e.now().UnixMilli()
	r, err := e.db.Exec(ctx, `UPDATE subscriptions SET lease_until = $2, lease_owner = $3 WHERE id = $1
		AND next_run IS NOT NULL AND next_run <= $4 AND status IN ('ACTIVE', 'RETRY') AND (lease_until IS NULL OR lease_until < $4)`,
		id, now+e.lease.Milliseconds(), e.node, now)
	if err != nil {
		return false, err
	}
	n, err := r.RowsAffected()
	return n == 1, err
}

func (e *Engine) release(ctx context.Context, id int64) {
	e.db.Exec(context.WithoutCancel(ctx), `UPDATE subscriptions SET lease_until = NULL, lease_owner = NULL WHERE id = $1 AND lease_owner = $2`, id, e.node)
}

func (e *Engine) load(ctx context.Context, q store.Querier, id int64) (vault.Subscription, error) {
	return vault.ScanSubscription(q.QueryRowContext(ctx, `SELECT `+vault.SubscriptionColumns+vault.SubscriptionFrom+`WHERE s.id = $1`, id))
}

// process charges the due cycle of a claimed subscription and records the outcome. It reports false
// when the charge must wait: an earlier attempt with the same key is still being resolved.
func (e *Engine) process(ctx context.Context, id int64) (bool, error) {
	var sub vault.Subscription
	if err := e.db.Read(ctx, func(q store.Querier) error {
		var err error
		sub, err = e.load(ctx, q, id)
		return err
	}); err != nil {
		return false, err
	}
	now := e.now()
	if sub.Status == plan.StatusActive {
		if err := e.skipBacklog(ctx, &sub, now); err != nil {
			return false, err
		}
	}
	t, err := e.charge(ctx, sub)
	var f *fault.Error
	switch {
	case errors.Is(err, vault.ErrNoCard):
		t = payment.Transaction{Status: payment.StatusDeclined, Message: "No card: the subscription's card was deleted"}
	case errors.As(err, &f) && f.Status == http.StatusConflict && f.Code == "idempotency_key_in_use":
		e.release(ctx, id)
		return false, nil // the attempt of this key is pending; ledger recovery resolves it
	case err != nil:
		return false, err
	}
	if err := e.record(ctx, sub, t, now); err != nil {
		return false, err
	}
	e.metrics.BillingCharge(t.Status == payment.StatusApproved)
	e.logCharge(ctx, sub, t)
	return true, nil
}

// logCharge logs a charge the engine made, approved or declined, so that the operator's log holds
// every charge the engine makes: the subscription, the cycle and attempt, the amount, the result and
// the ledger's transaction. No card data: not even the last four digits the transaction holds.
func (e *Engine) logCharge(ctx context.Context, sub vault.Subscription, t payment.Transaction) {
	args := []any{"subscription", sub.LookupID, "merchant_id", sub.MerchantID, "cycle", sub.Cycle, "attempt", sub.FailedAttempts + 1,
		"amount", money.Format(sub.Amount, sub.Currency), "currency", sub.Currency.Code, "result", t.Status, "transaction_id", t.TransactionID}
	if t.Status != payment.StatusApproved {
		args = append(args, "decline_code", t.DeclineCode, "message", t.Message)
	}
	e.log.InfoContext(ctx, "billing: charge", args...)
}

// maxInterrupted is how many times one attempt is made again after it failed with nothing charged.
const maxInterrupted = 2

// charge charges the current cycle of sub. Every try carries a key derived from the subscription,
// the cycle, the attempt (declines counted) and the try, so that a worker repeating the work of one
// that died gets the ledger's answer for each key instead of a second charge. A try that failed with
// nothing charged — interrupted by a crash and resolved by recovery, or a processing error — is made
// again under the next key instead of counting as the customer's decline.
func (e *Engine) charge(ctx context.Context, sub vault.Subscription) (payment.Transaction, error) {
	key := fmt.Sprintf("sub-%s-c%d-a%d", sub.LookupID, sub.Cycle, sub.FailedAttempts+1)
	for try := 0; ; try++ {
		k := key
		if try > 0 {
			k = fmt.Sprintf("%s-r%d", key, try)
		}
		t, err := e.vault.ChargeSubscription(ctx, sub, k)
		if err != nil || t.DeclineCode != processor.CodeProcessingError || try == maxInterrupted {
			return t, err
		}
		e.log.InfoContext(ctx, "billing: nothing charged, trying again", "subscription", sub.LookupID, "transaction_id", t.TransactionID)
	}
}

// skipBacklog records as missed the past-due cycles beyond the backlog limit, so that a customer is
// not charged many times at once after downtime.
func (e *Engine) skipBacklog(ctx context.Context, sub *vault.Subscription, now time.Time) error {
	due := 0
	for k := sub.Cycle; !sub.Due(k).After(now) && due <= e.backlog+100000; k++ {
		due++
	}
	if due <= e.backlog {
		return nil
	}
	skip := due - e.backlog
	sub.Cycle += skip
	sub.MissedCycles += skip
	_, err := e.db.Exec(ctx, `UPDATE subscriptions SET cycle = $2, missed_cycles = $3, next_run = $4, updated_at = $5
		WHERE id = $1 AND lease_owner = $6`, sub.ID, sub.Cycle, sub.MissedCycles, sub.Due(sub.Cycle).UnixMilli(), now.UnixMilli(), e.node)
	if err == nil {
		e.log.InfoContext(ctx, "billing: cycles missed during downtime recorded, not charged", "subscription", sub.LookupID, "cycles", skip)
	}
	return err
}

// record writes the outcome of a charge of sub's current cycle, and queues its receipt. The merchant
// may have paused or canceled the subscription while the charge ran: that status stands.
func (e *Engine) record(ctx context.Context, sub vault.Subscription, t payment.Transaction, now time.Time) error {
	ctx = context.WithoutCancel(ctx)
	return e.db.Write(ctx, func(tx *store.Tx) error {
		cur, err := e.load(ctx, tx, sub.ID)
		if err != nil {
			return err
		}
		if cur.Cycle != sub.Cycle {
			return nil // already recorded by a worker that held the lease before
		}
		if err := recordCharge(ctx, tx, sub, t, now); err != nil {
			return err
		}
		billable := cur.Status == plan.StatusActive || cur.Status == plan.StatusRetry
		cur.LastRun = nullMS(now)
		if t.Status == payment.StatusApproved {
			cur.Cycle++
			cur.CompletedCycles++
			cur.LastSuccess = nullMS(now)
			cur.FailedAttempts, cur.DelinquentCycles, cur.DelinquentSince = 0, 0, sql.NullInt64{}
			switch {
			case cur.NumberOfPayments > 0 && cur.CompletedCycles >= cur.NumberOfPayments:
				cur.Status, cur.NextRun = plan.StatusExpired, sql.NullInt64{}
			case billable:
				cur.Status, cur.NextRun = plan.StatusActive, nullMS(cur.Due(cur.Cycle))
			}
			if cur.SendReceipt {
				if err := e.queueReceipt(ctx, tx, cur, t, now); err != nil {
					return err
				}
			}
		} else {
			cur.FailedAttempts++
			if !cur.DelinquentSince.Valid {
				cur.DelinquentSince = nullMS(now)
			}
			switch {
			case !billable:
			case cur.FailedAttempts > len(e.retries):
				cur.Status, cur.NextRun = plan.StatusSuspended, sql.NullInt64{}
				cur.DelinquentCycles++
			default:
				cur.Status = plan.StatusRetry
				cur.NextRun = nullMS(time.UnixMilli(cur.DelinquentSince.Int64).Add(e.retries[cur.FailedAttempts-1]))
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE subscriptions SET status = $2, cycle = $3, next_run = $4, last_run = $5, last_success = $6,
			completed_cycles = $7, failed_attempts = $8, delinquent_cycles = $9, delinquent_since = $10, lease_until = NULL,
			lease_owner = NULL, updated_at = $11 WHERE id = $1`,
			cur.ID, cur.Status, cur.Cycle, cur.NextRun, cur.LastRun, cur.LastSuccess, cur.CompletedCycles, cur.FailedAttempts,
			cur.DelinquentCycles, cur.DelinquentSince, now.UnixMilli())
		if err != nil {
			return err
		}
		for _, typ := range outcomeEvents(t, cur) {
			if err := vault.RecordSubscription(ctx, tx, typ, cur, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// outcomeEvents are the events of a charge's outcome t, sub being the subscription after it: an
// approved charge is subscription.charged, followed by subscription.expired when it was the last of
// the plan's payments; a declined one is subscription.payment_failed, or subscription.suspended when
// it exhausted the retries.
func outcomeEvents(t payment.Transaction, sub vault.Subscription) []string {
	switch {
	case t.Status == payment.StatusApproved && sub.Status == plan.StatusExpired:
		return []string{event.SubscriptionCharged, event.SubscriptionExpired}
	case t.Status == payment.StatusApproved:
		return []string{event.SubscriptionCharged}
	case sub.Status == plan.StatusSuspended:
		return []string{event.SubscriptionSuspended}
	}
	return []string{event.SubscriptionPaymentFailed}
}

func nullMS(t time.Time) sql.NullInt64 { return sql.NullInt64{Int64: t.UnixMilli(), Valid: true} }
