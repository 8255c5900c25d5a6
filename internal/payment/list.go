package payment

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// List bounds (wire-contract.md: limit defaults to 100; at most 10000).
const (
	DefaultLimit = 100
	MaxLimit     = 10000
)

// Filter selects transactions of a merchant. Zero fields select everything.
type Filter struct {
	Limit         int
	Before, After int64     // cursor positions (transaction ids): newer than Before, older than After
	From, To      time.Time // transaction_time bounds, From inclusive, To exclusive
	Result        string    // APPROVED or DECLINED
	// MinAmount and MaxAmount are in ten-thousandths of a major unit, so that one bound applies
	// across currencies of 0 to 4 decimals.
	MinAmount, MaxAmount *int64
	Email                string // case-insensitive exact match
	FirstName, LastName  string // case-insensitive exact match

	// The dashboard's filters (issue 17, point 2).
	Kind          string // SALE, AUTHORIZATION, CAPTURE, REFUND or VOID
	CardPrefix    string // the card's first six digits, exact
	CardSuffix    string // the card's last four digits, exact
	TransactionID string // exact
	OrderID       string // exact
	ClientID      string // who asked: an API client's id, or a dashboard user's (the sales role sees its own)
	// CustomerLookupID: the payments of this vault customer's stored cards, and their follow-ups.
	CustomerLookupID string
}

// Page is one page of a list, newest first.
type Page struct {
	Transactions []Transaction
}

// scaled is a transaction's amount in ten-thousandths of a major unit.
const scaled = `(CASE t.scale WHEN 0 THEN t.amount * 10000 WHEN 1 THEN t.amount * 1000 WHEN 2 THEN t.amount * 100 WHEN 3 THEN t.amount * 10 ELSE t.amount END)`

// List returns a page of the merchant's transactions, newest first. Pending attempts are not listed.
func (l *Ledger) List(ctx context.Context, merchantID string, f Filter) (Page, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	where := []string{"t.merchant_id = $1", "t.status <> 'PENDING'"}
	args := []any{merchantID}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if f.After > 0 {
		add("t.id < ?", f.After)
	}
	if f.Before > 0 {
		add("t.id > ?", f.Before)
	}
	if !f.From.IsZero() {
		add("t.created_at >= ?", f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		add("t.created_at < ?", f.To.UnixMilli())
	}
	if f.Result != "" {
		add("t.status = ?", f.Result)
	}
	if f.MinAmount != nil {
		add(scaled+" >= ?", *f.MinAmount)
	}
	if f.MaxAmount != nil {
		add(scaled+" <= ?", *f.MaxAmount)
	}
	if f.Email != "" {
		add("LOWER(t.email) = ?", strings.ToLower(f.Email))
	}
	if f.FirstName != "" {
		add("LOWER(t.first_name) = ?", strings.ToLower(f.FirstName))
	}
	if f.LastName != "" {
		add("LOWER(t.last_name) = ?", strings.ToLower(f.LastName))
	}
	if f.Kind != "" {
		add("t.kind = ?", f.Kind)
	}
	if f.CardPrefix != "" {
		add("t.card_prefix = ?", f.CardPrefix)
	}
	if f.CardSuffix != "" {
		add("t.card_suffix = ?", f.CardSuffix)
	}
	if f.TransactionID != "" {
		add("t.transaction_id = ?", f.TransactionID)
	}
	if f.OrderID != "" {
		add("t.order_id = ?", f.OrderID)
	}
	if f.ClientID != "" {
		add("t.client_id = ?", f.ClientID)
	}
	if f.CustomerLookupID != "" {
		add("t.customer_lookup_id = ?", f.CustomerLookupID)
	}
	// Paging backwards (before) reads upwards from the cursor and turns the page round.
	order := "DESC"
	if f.Before > 0 && f.After == 0 {
		order = "ASC"
	}
	args = append(args, f.Limit)
	q := `SELECT ` + columns + from + `WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY t.id ` + order + ` LIMIT $` + strconv.Itoa(len(args))
	var p Page
	err := l.db.Read(ctx, func(sq store.Querier) error {
		rows, err := sq.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanTransaction(rows)
			if err != nil {
				return err
			}
			p.Transactions = append(p.Transactions, t)
		}
		return rows.Err()
	})
	if err != nil {
		return Page{}, err
	}
	if order == "ASC" {
		for i, j := 0, len(p.Transactions)-1; i < j; i, j = i+1, j-1 {
			p.Transactions[i], p.Transactions[j] = p.Transactions[j], p.Transactions[i]
		}
	}
	return p, nil
}
