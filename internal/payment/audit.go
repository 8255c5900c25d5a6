package payment

import (
	"context"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/store"
)

// Audit outcomes beyond the transaction statuses.
const (
	outcomeRejected = "REJECTED" // refused before the processor was asked: the state forbade it
	outcomeFailed   = "FAILED"   // interrupted; the processor never received it
	outcomeReversed = "REVERSED" // unanswered, then reversed at the processor: not in effect
)

// auditSelectSQL inserts an audit record whose values are parameters from $7, from a SELECT: the
// ledger appends it to the outcome's UPDATE (see finishAs), whose parameters are $1 to $6.
var auditSelectSQL = audit.SelectSQL(7)

// auditRejection records a follow-up that the parent's state refused.
func (l *Ledger) auditRejection(ctx context.Context, who Actor, kind string, parent Transaction, amount int64, why string) {
	ctx = context.WithoutCancel(ctx)
	err := l.db.Write(ctx, func(tx *store.Tx) error {
		return audit.Write(ctx, tx, audit.Record{MerchantID: who.MerchantID, ClientID: who.ClientID, Operation: operation(kind),
			TransactionID: parent.TransactionID, Amount: amount, Currency: parent.Currency.Code, Outcome: outcomeRejected,
			Detail: why, RequestID: who.RequestID, At: l.now()})
	})
	if err != nil {
		l.log.ErrorContext(ctx, "audit a rejected operation", "err", err)
	}
}
