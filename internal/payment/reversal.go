package payment

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/store"
)

// promptReversal bounds the first sending of a reversal while the client still waits for its answer.
const promptReversal = 5 * time.Second

// reversedMessage is the transaction message of an operation that got no answer and was reversed.
const reversedMessage = "No answer from the processor; the operation was reversed and nothing was charged"

// noAnswer handles a processor call that returned an error instead of an answer. A processor that
// undoes such a call (processor.Unanswered) gets its reversal recorded with the attempt's state in
// one database transaction and sent at once, so that a timeout ends in a reversal, never in doubt: a
// reversal acknowledged promptly turns the attempt into a decline (processing_error); otherwise the
// answer is a 502 and recovery finishes it — SendReversals sends it again until acknowledged.
// Any other error leaves the attempt pending for recovery (Lookup).
func (l *Ledger) noAnswer(ctx context.Context, t Transaction, acct processor.Account, err error) (Transaction, error) {
	var u *processor.Unanswered
	if !errors.As(err, &u) {
		return Transaction{}, l.unavailable(ctx, t, err)
	}
	l.log.WarnContext(ctx, "processor did not answer; reversing", "transaction_id", t.TransactionID, "err", err)
	if err := l.recordReversal(ctx, t, u); err != nil {
		return Transaction{}, err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), promptReversal)
	defer cancel()
	got, err := l.sendReversal(rctx, t, acct, u.Reversal, u.Completes, 0, operation(t.Kind))
	if err != nil {
		return Transaction{}, l.unavailable(ctx, t, err)
	}
	return got, nil
}

// recordReversal marks the attempt t as unanswered and records its reversal, in one transaction. An
// attempt already settled (by recovery, elsewhere) keeps its outcome and gets no reversal; a reversal
// already recorded for it stays as it is. The reversal is recorded claimed by this node, which sends it
// next: the sweep of any node takes it only if that sending ends without a word.
func (l *Ledger) recordReversal(ctx context.Context, t Transaction, u *processor.Unanswered) error {
	ctx = context.WithoutCancel(ctx)
	at := l.now()
	now, claimed := at.UnixMilli(), at.Add(promptReversal+l.timeout).UnixMilli()
	return l.db.Write(ctx, func(tx *store.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE transactions SET message = $2, updated_at = $3 WHERE id = $1 AND status = 'PENDING'`,
			t.ID, "No answer from the processor; reversal pending", now)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO reversals (transaction_id, processor_account, reversal, completes, next_attempt, created_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (transaction_id) DO NOTHING`, t.TransactionID, nullable(t.ProcessorAccount),
			u.Reversal, u.Completes, claimed, now)
		return err
	})
}

// sendReversal sends the reversal of t, its attempts-th sending, through the processor of acct. Once
// acknowledged, t is declined CodeProcessingError (its audit record under op) — or, for a reversal
// that completes the operation, approved — and the reversal is done; otherwise the failure is recorded
// and the reversal is due again after a backoff.
func (l *Ledger) sendReversal(ctx context.Context, t Transaction, acct processor.Account, reversal string, completes bool, attempts int,
	op string) (Transaction, error) {
	r, ok := acct.Processor.(processor.Reverser)
	var err error
	if !ok {
		err = fmt.Errorf("processor account %q answered that a call is to be reversed, but cannot reverse", acct.ID)
	} else {
		err = r.Reverse(ctx, processor.Merchant{ID: t.MerchantID}, reversal)
	}
	ctx = context.WithoutCancel(ctx)
	now := l.now()
	if err != nil {
		l.log.WarnContext(ctx, "reversal not acknowledged; will send it again", "transaction_id", t.TransactionID, "attempt", attempts+1, "err", err)
		if _, werr := l.db.Exec(ctx, `UPDATE reversals SET attempts = attempts + 1, next_attempt = $2, last_error = $3 WHERE transaction_id = $1`,
			t.TransactionID, now.Add(reversalBackoff(attempts+1)).UnixMilli(), err.Error()); werr != nil {
			l.log.ErrorContext(ctx, "record a reversal's failed sending", "transaction_id", t.TransactionID, "err", werr)
		}
		return Transaction{}, err
	}
	// The outcome is given, so that the reversal's finish is audited as the gateway's own work (audited).
	res, outcome := processor.Result{Code: processor.CodeProcessingError, Message: reversedMessage}, outcomeReversed
	if completes {
		res, outcome = processor.Result{Approved: true, Message: "Approved after a repeated request"}, StatusApproved
	}
	got, err := l.finishAs(ctx, t, acct, res, op, outcome, false)
	if err != nil {
		return Transaction{}, err
	}
	if _, err := l.db.Exec(ctx, `UPDATE reversals SET attempts = attempts + 1, acknowledged_at = $2 WHERE transaction_id = $1`,
		t.TransactionID, now.UnixMilli()); err != nil {
		// Sent again later: the acquirer answers a retransmission as before, and the outcome stands.
		l.log.ErrorContext(ctx, "record a reversal's acknowledgement", "transaction_id", t.TransactionID, "err", err)
	}
	l.log.InfoContext(ctx, "reversal acknowledged", "transaction_id", t.TransactionID, "status", got.Status)
	return got, nil
}

// reversalBackoff is how long to wait before the next sending after n failed ones: 1 s, doubling, at
// most a minute. A reversal is never given up: the acquirer may hold the money until it arrives.
func reversalBackoff(n int) time.Duration {
	if n > 6 {
		return time.Minute
	}
	return time.Second << (n - 1)
}

// SendReversals sends every reversal that is due, each by one node at a time, and returns how many
// were acknowledged. A node claims a reversal by moving its next_attempt past the time its sending can
// take; a node that dies holding it leaves it due again after that.
func (l *Ledger) SendReversals(ctx context.Context) (int, error) {
	now := l.now()
	type due struct {
		t         Transaction
		reversal  string
		completes bool
		attempts  int
		next      int64
	}
	var todo []due
	err := l.db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT `+columns+`, r.reversal, r.completes, r.attempts, r.next_attempt`+from+
			`JOIN reversals r ON r.transaction_id = t.transaction_id
			WHERE r.acknowledged_at IS NULL AND r.next_attempt <= $1 ORDER BY r.next_attempt LIMIT 100`, now.UnixMilli())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d due
			var err error
			if d.t, err = scanTransaction(scanWith{rows, []any{&d.reversal, &d.completes, &d.attempts, &d.next}}); err != nil {
				return err
			}
			todo = append(todo, d)
		}
		return rows.Err()
	})
	if err != nil {
		return 0, err
	}
	done := 0
	for _, d := range todo {
		r, err := l.db.Exec(ctx, `UPDATE reversals SET next_attempt = $3 WHERE transaction_id = $1 AND next_attempt = $2 AND acknowledged_at IS NULL`,
			d.t.TransactionID, d.next, now.Add(promptReversal+l.timeout).UnixMilli())
		if err != nil {
			return done, err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			continue // another node has it
		}
		acct, err := l.procs.Account(ctx, d.t.ProcessorAccount)
		if err != nil {
			return done, err
		}
		sctx, cancel := context.WithTimeout(ctx, l.timeout)
		_, err = l.sendReversal(sctx, d.t, acct, d.reversal, d.completes, d.attempts, "reverse")
		cancel()
		if err == nil {
			done++
		}
	}
	return done, nil
}

// unavailable answers a processor call that failed: the attempt stays pending, for recovery or for
// its reversal.
func (l *Ledger) unavailable(ctx context.Context, t Transaction, err error) error {
	l.log.WarnContext(ctx, "processor call failed; attempt left pending", "transaction_id", t.TransactionID, "err", err)
	return &fault.Error{Status: http.StatusBadGateway, Code: "processor_unavailable",
		Message: "The processor did not answer. Transaction " + t.TransactionID + " is pending and will be resolved; " +
			"retry with the same Idempotency-Key to learn its outcome."}
}
