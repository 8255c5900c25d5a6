package payment

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/store"
)

// A write whose answer was lost.
//
// On PostgreSQL a connection can be cut after COMMIT was sent and before its answer arrived (a
// failover, a network cut): the write was committed or not, and the node cannot tell which. The store
// answers such a write with store.ErrStorageUnavailable, as it does a write that surely failed. The
// ledger then never acts on a write it does not know to be durable, and makes the truth known on a
// new connection while the attempt's lease keeps it this node's own:
//
//   - an attempt (its INSERT, with a follow-up's reservation and a token's consumption) is never
//     followed by a processor call; it is withdrawn (withdraw);
//   - an outcome, the processor's answer, is written again (finishAs, reapply) until it is recorded.
//
// What the lease does not leave time for, recovery does once the lease has run out.

// reapply runs write again after err, the error of its last run, while that error leaves it in doubt,
// until attempt t's lease ends (store.DB.Again); it returns the error of the last run. The lease is read
// in the ledger's time and waited for in real time, so that a test's stopped clock still ends it.
// The writes run so change only a PENDING row, so that of recovery's finish and this one, begun
// around the lease's end, one counts.
func (l *Ledger) reapply(ctx context.Context, t Transaction, err error, write func() error) error {
	deadline := time.Now().Add(time.UnixMilli(l.lease(t.CreatedAt)).Sub(l.now()))
	if err = l.db.Again(deadline, err, write); l.db.InDoubt(err) {
		l.log.WarnContext(ctx, "the database did not answer within the attempt's lease; recovery will settle it",
			"transaction_id", t.TransactionID, "err", err)
	}
	return err
}

// sameOutcome reports whether the recorded transaction got holds the outcome of t.
func sameOutcome(got, t Transaction) bool {
	return got.Status == t.Status && got.DeclineCode == t.DeclineCode && got.ProcessorRef == t.ProcessorRef &&
		got.Message == t.Message
}

// withdraw settles attempt t, whose write is in doubt (store.DB.InDoubt) before the
// processor was asked: it may have been committed with only its answer lost. The processor is not
// asked for it, ever. If the attempt is in the database it is declined as interrupted — what recovery
// would record of it, the release of a follow-up's reservation included — and its idempotency key is
// unbound first, so that the client's retry with that key runs afresh and makes the one processor
// call. Made on new connections within the attempt's lease (reapply); what is not done by then,
// recovery does, and the retry meanwhile is told the key is in use. A card token the attempt consumed
// stays consumed.
func (l *Ledger) withdraw(ctx context.Context, t Transaction, acct processor.Account, err error) {
	ctx = context.WithoutCancel(ctx)
	found := false
	unbind := func() error {
		return l.db.Write(ctx, func(tx *store.Tx) error {
			err := tx.QueryRowContext(ctx, `UPDATE transactions SET idempotency_key = NULL
				WHERE transaction_id = $1 AND status = 'PENDING' RETURNING id`, t.TransactionID).Scan(&t.ID)
			found = err == nil
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			return err
		})
	}
	if err := l.reapply(ctx, t, err, unbind); err != nil || !found {
		return
	}
	t.IdempotencyKey = ""
	if _, err := l.finishAs(ctx, t, acct, processor.Result{Code: processor.CodeProcessingError, Message: notSentMessage},
		opRecover, outcomeFailed, true); err != nil {
		l.log.WarnContext(ctx, "withdraw an attempt whose write's answer was lost; recovery will settle it",
			"transaction_id", t.TransactionID, "err", err)
		return
	}
	l.log.InfoContext(ctx, "withdrew an attempt whose write's answer was lost; the processor was not asked",
		"transaction_id", t.TransactionID, "kind", t.Kind)
}

// notSentMessage is the transaction message of an attempt the processor never received.
const notSentMessage = "Interrupted before the processor received it; nothing was charged"
