package billing

import (
	"context"
	"time"

	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
)

// Charge is one charge the engine made of a subscription's cycle: the history of billed cycles.
type Charge struct {
	ID            int64
	Cycle         int // 0 is the start
	Attempt       int // 1 for the cycle's first charge, one more after each decline
	TransactionID string
	Status        string // payment.StatusApproved or payment.StatusDeclined
	Amount        int64
	Currency      money.Currency
	Message       string
	At            time.Time
}

// recordCharge writes the charge t of sub's current cycle (as it was charged) into its history, in the
// transaction that records the outcome.
func recordCharge(ctx context.Context, tx *store.Tx, sub vault.Subscription, t payment.Transaction, now time.Time) error {
	var txID any
	if t.TransactionID != "" {
		txID = t.TransactionID
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO subscription_charges (subscription_id, cycle, attempt, transaction_id, status, amount,
		currency, scale, message, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		sub.ID, sub.Cycle, sub.FailedAttempts+1, txID, t.Status, sub.Amount, sub.Currency.Code, sub.Currency.Digits, t.Message, now.UnixMilli())
	return err
}

// Charges returns the charges of a subscription (its row id), newest first.
func Charges(ctx context.Context, q store.Querier, subscriptionID int64) ([]Charge, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, cycle, attempt, COALESCE(transaction_id, ''), status, amount, currency, scale, message,
		created_at FROM subscription_charges WHERE subscription_id = $1 ORDER BY id DESC`, subscriptionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Charge
	for rows.Next() {
		var c Charge
		var at int64
		if err := rows.Scan(&c.ID, &c.Cycle, &c.Attempt, &c.TransactionID, &c.Status, &c.Amount, &c.Currency.Code, &c.Currency.Digits,
			&c.Message, &at); err != nil {
			return nil, err
		}
		c.At = time.UnixMilli(at)
		out = append(out, c)
	}
	return out, rows.Err()
}
