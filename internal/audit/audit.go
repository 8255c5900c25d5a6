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
	// UserID is the dashboard's staff user who asked, and Address where the request came from; both
	// "" for the API and the gateway's own work. Write and From take them from the context (WithActor).
	UserID, Address string
	At              time.Time
}

// Actor is the staff user a dashboard request acts for.
type Actor struct {
	UserID  string
	Address string // the client's address (httpapi.Proxies.ClientAddr)
}

type actorKey struct{}

// WithActor returns ctx naming the staff user a dashboard request acts for: every record written under
// it names the user and the address.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the staff user of ctx; zero outside the dashboard.
func ActorFrom(ctx context.Context) Actor {
	a, _ := ctx.Value(actorKey{}).(Actor)
	return a
}

// From returns r naming the staff user of ctx, unless r names one already.
func (r Record) From(ctx context.Context) Record {
	if r.UserID == "" {
		a := ActorFrom(ctx)
		r.UserID, r.Address = a.UserID, a.Address
	}
	return r
}

// Done is the outcome of a vault change.
const Done = "DONE"

// insertSQL is the head of the INSERT of a record; Args are its values in order.
const insertSQL = `INSERT INTO audit_log (merchant_id, client_id, operation, transaction_id, resource, amount, currency, outcome,
	detail, request_id, user_id, address, created_at) `

// Columns is the number of values a record has (Args), the parameters SelectSQL takes.
const Columns = 13

// SelectSQL inserts the record whose Args are the statement's parameters $n to $n+12, from a SELECT,
// so that it can follow another statement in one round trip: `WITH done AS (… RETURNING id) ` +
// SelectSQL(7) + ` FROM done`.
func SelectSQL(n int) string {
	s := insertSQL + `SELECT `
	for i := range Columns {
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
		nullable(r.UserID), nullable(r.Address), r.At.UnixMilli()}
}

// Write inserts the record in tx, so that it commits or rolls back with the change it records, naming
// the staff user of ctx (From).
func Write(ctx context.Context, tx *store.Tx, r Record) error {
	_, err := tx.ExecContext(ctx, insertSQL+`VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`, r.From(ctx).Args()...)
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
