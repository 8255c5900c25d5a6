package audit

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// List bounds of the activity page.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Entry is a record as read back, with its position in the log.
type Entry struct {
	ID int64
	Record
}

// Filter selects a merchant's records. Zero fields select everything.
type Filter struct {
	UserID    string // only this staff user's
	Operation string // only this operation: "refund", "client.create", …
	Before    int64  // only records older than this entry (its ID): the next page's cursor
	Limit     int    // at most this many: DefaultLimit when 0, at most MaxLimit
}

// List returns the merchant's records that f selects, newest first. Each filter is served by an index
// that begins with the merchant (audit_log_merchant, audit_log_user, audit_log_operation), so that a
// page costs its rows, not the log's.
func List(ctx context.Context, q store.Querier, merchantID string, f Filter) ([]Entry, error) {
	cond, args := listCondition(merchantID, f)
	return entries(ctx, q, merchantID, cond, args...)
}

// listCondition is what List selects, with its order and limit, and its parameters. A user's records
// are read in audit_log_user, which holds only the records that name a user (migration 00052): a
// condition "user_id = $n" implies that the user is not NULL, as both planners take it to.
func listCondition(merchantID string, f Filter) (string, []any) {
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	f.Limit = min(f.Limit, MaxLimit)
	where := []string{"merchant_id = $1"}
	args := []any{merchantID}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+" $"+strconv.Itoa(len(args)))
	}
	if f.UserID != "" {
		add("user_id =", f.UserID)
	}
	if f.Operation != "" {
		add("operation =", f.Operation)
	}
	if f.Before > 0 {
		add("id <", f.Before)
	}
	args = append(args, f.Limit)
	return strings.Join(where, " AND ") + ` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args)), args
}

// Trail returns the merchant's records of the transactions named (their transaction ids), oldest
// first: the transaction's audit trail, every change to it and who made it, served by the index on
// transaction_id.
func Trail(ctx context.Context, q store.Querier, merchantID string, transactionIDs []string) ([]Entry, error) {
	if len(transactionIDs) == 0 {
		return nil, nil
	}
	args := []any{merchantID}
	for _, id := range transactionIDs {
		args = append(args, id)
	}
	return entries(ctx, q, merchantID, trailCondition(len(transactionIDs)), args...)
}

// trailCondition selects the merchant's ($1) records of n transactions ($2 to $n+1), oldest first.
func trailCondition(n int) string {
	ph := make([]string, n)
	for i := range ph {
		ph[i] = "$" + strconv.Itoa(i+2)
	}
	return `merchant_id = $1 AND transaction_id IS NOT NULL AND transaction_id IN (` + strings.Join(ph, ", ") + `) ORDER BY id`
}

// entries reads the merchant's records WHERE cond (with its ORDER BY and LIMIT).
func entries(ctx context.Context, q store.Querier, merchantID, cond string, args ...any) ([]Entry, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, client_id, operation, transaction_id, resource, amount, currency, outcome, detail,
		request_id, user_id, address, created_at FROM audit_log WHERE `+cond, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e := Entry{Record: Record{MerchantID: merchantID}}
		var client, tx, resource, currency, request, user, addr sql.NullString
		var amount sql.NullInt64
		var at int64
		if err := rows.Scan(&e.ID, &client, &e.Operation, &tx, &resource, &amount, &currency, &e.Outcome, &e.Detail, &request,
			&user, &addr, &at); err != nil {
			return nil, err
		}
		e.ClientID, e.TransactionID, e.Resource, e.Currency = client.String, tx.String, resource.String, currency.String
		e.RequestID, e.UserID, e.Address, e.Amount = request.String, user.String, addr.String, amount.Int64
		e.At = time.UnixMilli(at).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}
