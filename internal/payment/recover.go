package payment

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"time"

	"github.com/kassapay/kassa/internal/clock"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/store"
)

// Recover resolves attempts that were recorded but whose outcome never was: the process that made
// them died between asking the processor and recording its answer. Each is asked of the processor;
// one the processor never received is declined as interrupted, and a follow-up's reservation is
// released. A processor that cannot be asked (ISO 8583) answers that the operation is to be reversed:
// the reversal is recorded and sent as for a call that timed out. None is sent to the processor again,
// so nothing is charged twice.
//
// With all, every pending attempt is taken (a single server at start-up: none can still be running);
// otherwise only those whose lease has run out, which no live node can still finish.
func (l *Ledger) Recover(ctx context.Context, all bool) (int, error) {
	now := l.now()
	cutoff := now.UnixMilli()
	if all {
		cutoff = math.MaxInt64
	}
	type pending struct {
		t     Transaction
		lease int64
	}
	var todo []pending
	err := l.db.Read(ctx, func(q store.Querier) error {
		// An attempt with a reversal is the reversal's to settle (SendReversals).
		rows, err := q.QueryContext(ctx, `SELECT `+columns+`, t.lease_until`+from+
			`WHERE t.status = 'PENDING' AND t.lease_until <= $1
			AND NOT EXISTS (SELECT 1 FROM reversals r WHERE r.transaction_id = t.transaction_id) ORDER BY t.id LIMIT 500`, cutoff)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p pending
			var err error
			if p.t, err = scanTransaction(scanWith{rows, []any{&p.lease}}); err != nil {
				return err
			}
			todo = append(todo, p)
		}
		return rows.Err()
	})
	if err != nil {
		return 0, err
	}
	done := 0
	for _, p := range todo {
		claimed, err := l.claim(ctx, p.t.ID, p.lease, now)
		if err != nil {
			return done, err
		}
		if !claimed {
			continue // another node took it, or its own node finished it
		}
		acct, err := l.procs.Account(ctx, p.t.ProcessorAccount)
		if err != nil {
			return done, err
		}
		res, err := l.call(ctx, acct, "lookup", func(ctx context.Context) (processor.Result, error) {
			return acct.Processor.Lookup(ctx, processor.Operation{Reference: p.t.TransactionID, Merchant: processor.Merchant{ID: p.t.MerchantID},
				Kind: processorOperations[p.t.Kind], Amount: p.t.Amount, Currency: p.t.Currency, Trace: p.t.ProcessorTrace})
		})
		outcome := ""
		var u *processor.Unanswered
		switch {
		case errors.Is(err, processor.ErrNotFound):
			res = processor.Result{Code: processor.CodeProcessingError, Message: notSentMessage}
			outcome = outcomeFailed
		case errors.As(err, &u):
			// The processor cannot ask, and undoes it: recorded, then sent now and until acknowledged.
			if err := l.recordReversal(ctx, p.t, u); err != nil {
				return done, err
			}
			rctx, cancel := context.WithTimeout(ctx, l.timeout)
			_, err := l.sendReversal(rctx, p.t, acct, u.Reversal, u.Completes, 0, opRecover)
			cancel()
			if err == nil {
				done++
				l.metrics.Recovered()
			}
			continue
		case err != nil:
			l.log.WarnContext(ctx, "recovery lookup failed; will retry", "transaction_id", p.t.TransactionID, "err", err)
			continue
		}
		t, err := l.finishAs(ctx, p.t, acct, res, opRecover, outcome, false)
		if err != nil {
			return done, err
		}
		l.metrics.Recovered()
		l.log.InfoContext(ctx, "recovered an interrupted attempt", "transaction_id", t.TransactionID, "kind", t.Kind, "status", t.Status)
		done++
	}
	return done, nil
}

// Pending counts the attempts whose outcome is not recorded yet: those in flight, and those recovery
// or a reversal has still to settle.
func (l *Ledger) Pending(ctx context.Context) (int, error) {
	var n int
	err := l.db.Read(ctx, func(q store.Querier) error {
		return q.QueryRowContext(ctx, `SELECT COUNT(*) FROM transactions WHERE status = 'PENDING'`).Scan(&n)
	})
	return n, err
}

// claim extends the lease of a pending attempt, so that one recoverer at a time works on it.
func (l *Ledger) claim(ctx context.Context, id, lease int64, now time.Time) (bool, error) {
	var n int64
	err := l.db.Write(ctx, func(tx *store.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE transactions SET lease_until = $3 WHERE id = $1 AND status = 'PENDING' AND lease_until = $2`,
			id, lease, l.lease(now))
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return n == 1, err
}

// scanWith reads the columns of a Transaction followed by more.
type scanWith struct {
	rows *sql.Rows
	more []any
}

func (s scanWith) Scan(dest ...any) error { return s.rows.Scan(append(dest, s.more...)...) }

// Run looks for abandoned attempts every recovery interval, and sends the reversals that are due at
// once and then every reversal interval, until ctx is done.
func (l *Ledger) Run(ctx context.Context) {
	sweep := func(ctx context.Context) error {
		_, err := l.SendReversals(ctx)
		return err
	}
	go func() {
		// At once too: reversals a previous process left unacknowledged are due since before it died.
		if err := sweep(ctx); err != nil && ctx.Err() == nil {
			l.log.WarnContext(ctx, "reversal sweep failed", "err", err)
		}
		clock.Every(ctx, l.reversals, l.log, "reversal sweep", sweep)
	}()
	clock.Every(ctx, l.interval, l.log, "recovery sweep", func(ctx context.Context) error {
		_, err := l.Recover(ctx, false)
		return err
	})
}
