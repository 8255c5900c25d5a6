package payment

import (
	"context"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/store"
)

// Audit outcomes beyond the transaction statuses.
const (
	outcomeRejected = "REJECTED" // refused before the processor was asked: the state forbade it
	outcomeFailed   = "FAILED"   // interrupted; the processor never received it
	outcomeReversed = "REVERSED" // unanswered, then reversed at the processor: not in effect
)

// opRecover is the audit operation of recovery's finish of an interrupted attempt.
const opRecover = "recover"

// StaffClient is the head of the client id the ledger records for what a dashboard user does
// ("dashboard/" + the user's id; API clients' ids never contain a slash). Every finish of such a
// transaction writes an audit record (audited), so a reader of the history takes those rows from
// the audit log and not from the ledger.
const StaffClient = "dashboard/"

// audited says whether the finish of t's op, under ctx, with the audit outcome given ("" for the
// transaction's status), writes an audit record beside the ledger row (see finishAs): when a staff
// user acts (in ctx, or as t's client: the virtual terminal's card form is the hosted page's request),
// when the finish is recovery's, or when the outcome is given, as a reversal's always is.
func audited(ctx context.Context, t Transaction, op, outcome string) bool {
	return audit.ActorFrom(ctx).UserID != "" || strings.HasPrefix(t.ClientID, StaffClient) || op == opRecover || outcome != ""
}

// auditRecord is the audit record of t's finish by op: naming the staff user of ctx, or else, for
// a staff user's transaction that is not the gateway's own work, the user its client id names.
func auditRecord(ctx context.Context, t Transaction, op, outcome string, at time.Time) audit.Record {
	a := audit.Record{MerchantID: t.MerchantID, ClientID: t.ClientID, Operation: op, TransactionID: t.TransactionID,
		Amount: t.Amount, Currency: t.Currency.Code, Outcome: outcome, Detail: t.Message, RequestID: t.RequestID, At: at}.From(ctx)
	if user, ok := strings.CutPrefix(t.ClientID, StaffClient); ok && a.UserID == "" && op != opRecover {
		a.UserID = user
	}
	return a
}

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
