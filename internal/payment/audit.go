package payment

import (
	"context"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// auditRecord is one line of the audit log: who did what to which money, when, with what outcome.
// It never holds card data.
type auditRecord struct {
	merchantID, clientID, operation, transactionID string
	amount                                         int64
	currency, outcome, detail, requestID           string
	at                                             time.Time
}

// Audit outcomes beyond the transaction statuses.
const (
	outcomeRejected = "REJECTED" // refused before the processor was asked: the state forbade it
	outcomeFailed   = "FAILED"   // interrupted; the processor never received it
)

// auditColumns are the columns an audit record fills, in the order of args.
const auditColumns = `INSERT INTO audit_log (merchant_id, client_id, operation, transaction_id, amount, currency, outcome,
	detail, request_id, created_at) `

// auditSelectSQL inserts an audit record whose values are parameters $7 to $16, from a SELECT: the
// ledger appends it to the outcome's UPDATE (see finishAs), whose parameters are $1 to $6.
const auditSelectSQL = auditColumns + `SELECT $7, $8, $9, $10, $11, $12, $13, $14, $15, $16`

func (a auditRecord) args() []any {
	return []any{a.merchantID, nullable(a.clientID), a.operation, nullable(a.transactionID), a.amount, a.currency,
		a.outcome, a.detail, nullable(a.requestID), a.at.UnixMilli()}
}

func audit(ctx context.Context, tx *store.Tx, a auditRecord) error {
	_, err := tx.ExecContext(ctx, auditColumns+`VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, a.args()...)
	return err
}

// auditRejection records a follow-up that the parent's state refused.
func (l *Ledger) auditRejection(ctx context.Context, who Actor, kind string, parent Transaction, amount int64, why string) {
	ctx = context.WithoutCancel(ctx)
	err := l.db.Write(ctx, func(tx *store.Tx) error {
		return audit(ctx, tx, auditRecord{merchantID: who.MerchantID, clientID: who.ClientID, operation: operation(kind),
			transactionID: parent.TransactionID, amount: amount, currency: parent.Currency.Code, outcome: outcomeRejected,
			detail: why, requestID: who.RequestID, at: l.now()})
	})
	if err != nil {
		l.log.ErrorContext(ctx, "audit a rejected operation", "err", err)
	}
}
