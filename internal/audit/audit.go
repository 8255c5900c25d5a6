// Package audit writes the audit log: who did what to which money or vault record, when, and with
// what outcome (PCI DSS v4 10.2.1: individual access to cardholder data, and changes to it, are
// logged). A record never holds card data: transactions are named by their transaction id, vault
// records by their lookup ids.
package audit

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/kassapay/kassa/internal/auth"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/store"
)

// Record is one line of the audit log.
type Record struct {
	MerchantID string
	ClientID   string // the API client that asked, or "" for the gateway's own work
	Operation  string // sale, authorize, capture, refund, void, recover; customer.create, card.delete, …
	// TransactionID names the transaction of a money operation; Resource a vault record
	// ("customer/<lookup>", "customer/<lookup>/card/<lookup>", …).
	TransactionID, Resource string
	Amount                  int64
	Currency                string
	Outcome                 string // APPROVED, DECLINED, FAILED, REJECTED, or DONE for a vault change
	Detail                  string
	RequestID               string
	At                      time.Time
}

// Done is the outcome of a vault change.
const Done = "DONE"

// insertSQL is the head of the INSERT of a record; Args are its values in order.
const insertSQL = `INSERT INTO audit_log (merchant_id, client_id, operation, transaction_id, resource, amount, currency, outcome,
	detail, request_id, created_at) `

// SelectSQL inserts the record whose Args are the statement's parameters $n to $n+10, from a SELECT,
// so that it can follow another statement in one round trip: `WITH done AS (… RETURNING id) ` +
// SelectSQL(7) + ` FROM done`.
func SelectSQL(n int) string {
	s := insertSQL + `SELECT `
	for i := range 11 {
		if i > 0 {
			s += ", "
		}
		s += "$" + strconv.Itoa(n+i)
	}
	return s
}

// Args are the record's values in the order of the INSERT's columns.
func (r Record) Args() []any {
	return []any{r.MerchantID, nullable(r.ClientID), r.Operation, nullable(r.TransactionID), nullable(r.Resource),
		sql.NullInt64{Int64: r.Amount, Valid: r.Currency != ""}, nullable(r.Currency), r.Outcome, r.Detail, nullable(r.RequestID),
		r.At.UnixMilli()}
}

// Write inserts the record in tx, so that it commits or rolls back with the change it records.
func Write(ctx context.Context, tx *store.Tx, r Record) error {
	_, err := tx.ExecContext(ctx, insertSQL+`VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, r.Args()...)
	return err
}

func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// Change records, in tx, a change to one of the merchant's records (op such as "card.add", resource
// such as "customer/<lookup>/card/<lookup>"), naming the API client and request that asked when
// there is one.
func Change(ctx context.Context, tx *store.Tx, merchantID, op, resource string, at time.Time) error {
	r := Record{MerchantID: merchantID, Operation: op, Resource: resource, Outcome: Done, RequestID: httpapi.RequestID(ctx), At: at}
	if c := auth.ClaimsFrom(ctx); c.MerchantID != "" {
		r.ClientID = c.ClientIDString()
	}
	return Write(ctx, tx, r)
}
