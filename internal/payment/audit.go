package payment

import (
	"context"
	"database/sql"
	"time"
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

func audit(ctx context.Context, tx *sql.Tx, a auditRecord) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO audit_log (merchant_id, client_id, operation, transaction_id, amount, currency,
		outcome, detail, request_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		a.merchantID, nullable(a.clientID), a.operation, nullable(a.transactionID), a.amount, a.currency, a.outcome,
		a.detail, nullable(a.requestID), a.at.UnixMilli())
	return err
}

// auditRejection records a follow-up that the parent's state refused.
func (l *Ledger) auditRejection(ctx context.Context, who Actor, kind string, parent Transaction, amount int64, why string) {
	ctx = context.WithoutCancel(ctx)
	err := l.db.Write(ctx, func(tx *sql.Tx) error {
		return audit(ctx, tx, auditRecord{merchantID: who.MerchantID, clientID: who.ClientID, operation: operation(kind),
			transactionID: parent.TransactionID, amount: amount, currency: parent.Currency.Code, outcome: outcomeRejected,
			detail: why, requestID: who.RequestID, at: l.now()})
	})
	if err != nil {
		l.log.ErrorContext(ctx, "audit a rejected operation", "err", err)
	}
}
