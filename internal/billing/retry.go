package billing

import (
	"context"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/plan"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
)

// Retry names the charge a "retry now" asks for: the subscription's cycle and its declined attempts
// of that cycle as the page that asks showed them. A form sent twice, or a page reloaded, asks for
// the same charge, which is made once.
type Retry struct {
	Cycle, Failed int
}

// RetryOf is the charge a retry of sub, as it stands, asks for.
func RetryOf(sub vault.Subscription) Retry {
	return Retry{Cycle: sub.Cycle, Failed: sub.FailedAttempts}
}

// RetryNow charges the unpaid cycle of a subscription in RETRY or SUSPENDED now, through the engine
// and exactly once (the dashboard's "retry now"), and returns the charge and true; or false when this
// request charged nothing because the charge asked for was made, or is being made, by another
// request, node or the engine's schedule.
//
// Exactly once: the subscription is claimed with the engine's lease in one conditional UPDATE that
// also checks it still is as want saw it, so that of any number of requests on any number of nodes
// one wins and the others find it leased or moved on; and the charge carries the engine's ledger key
// of the cycle and attempt, so that even a charge repeated after a crash is the ledger's answer
// rather than a second charge.
//
// A retry of a RETRY subscription is its next scheduled retry, made now: a decline counts as one of
// the retries. One of a SUSPENDED subscription is one more attempt of the unpaid cycle: cycles that
// passed meanwhile are missed, as when it is reactivated (vault.Subscription.MissPassedCycles);
// declined, it stays SUSPENDED; approved, it is ACTIVE again.
func (e *Engine) RetryNow(ctx context.Context, merchantID, customerLookup, subLookup string, want Retry) (Charge, bool, error) {
	now := e.now()
	var id int64
	claimed := false
	err := e.db.Write(ctx, func(tx *store.Tx) error {
		sub, err := e.vault.Subscription(ctx, tx, merchantID, customerLookup, subLookup)
		if err != nil {
			return err
		}
		id = sub.ID
		if RetryOf(sub) != want {
			return nil // made already: this is a second submit of the same form
		}
		if sub.Status != plan.StatusRetry && sub.Status != plan.StatusSuspended {
			return fault.Conflict("subscription_not_retryable",
				"Subscription %s is %s: only a subscription in RETRY or SUSPENDED can be retried now.", subLookup, sub.Status)
		}
		next := sub
		if sub.Status == plan.StatusSuspended {
			next.MissPassedCycles(now)
			// The unpaid cycle is counted delinquent again if this attempt is declined.
			next.DelinquentCycles = max(0, next.DelinquentCycles-1)
		}
		r, err := tx.ExecContext(ctx, `UPDATE subscriptions SET status = 'RETRY', next_run = $5, cycle = $6, missed_cycles = $7,
			delinquent_cycles = $8, lease_until = $9, lease_owner = $10, updated_at = $5
			WHERE id = $1 AND status = $2 AND cycle = $3 AND failed_attempts = $4 AND (lease_until IS NULL OR lease_until < $5)`,
			sub.ID, sub.Status, sub.Cycle, sub.FailedAttempts, now.UnixMilli(), next.Cycle, next.MissedCycles, next.DelinquentCycles,
			now.Add(e.lease).UnixMilli(), e.node)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n != 1 {
			return err // another request holds it
		}
		claimed = true
		return audit.Change(ctx, tx, merchantID, "subscription.retry", vault.SubscriptionResource(customerLookup, subLookup), now)
	})
	if err != nil || !claimed {
		return Charge{}, false, err
	}
	done, err := e.process(ctx, id)
	if err != nil {
		e.release(ctx, id) // due now: the engine's schedule makes the charge
		return Charge{}, false, err
	}
	if !done {
		return Charge{}, false, nil // an earlier charge under the same key is being resolved
	}
	var charges []Charge
	err = e.db.Read(ctx, func(q store.Querier) error {
		charges, err = Charges(ctx, q, id)
		return err
	})
	if err != nil || len(charges) == 0 {
		return Charge{}, false, err
	}
	return charges[0], true, nil
}
