package payment

import (
	"cmp"
	"context"
	"slices"
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
	Name             string // the customer's first or last name, case-insensitive exact match
}

// dated reports whether f bounds the transactions' time: such a list is ordered by time (then id),
// which the index on (merchant, created_at, id) serves whatever the range's age; by id alone, a range
// long past would be found only after every newer row.
func (f Filter) dated() bool { return !f.From.IsZero() || !f.To.IsZero() }

// Page is one page of a list, newest first.
type Page struct {
	Transactions []Transaction
}

// scaled is a transaction's amount in ten-thousandths of a major unit.
const scaled = `(CASE t.scale WHEN 0 THEN t.amount * 10000 WHEN 1 THEN t.amount * 1000 WHEN 2 THEN t.amount * 100 WHEN 3 THEN t.amount * 10 ELSE t.amount END)`

// dashboardClients is the condition of the partial index over what dashboard users made (migration
// 00027): a filter by such a client repeats it, so that both databases see that the index applies.
const dashboardClients = `t.client_id LIKE 'dashboard/%'`

// query is a statement's conditions and their arguments, $1 the merchant.
type query struct {
	where []string
	args  []any
}

// add appends cond, its ? standing for v.
func (q *query) add(cond string, v any) {
	q.args = append(q.args, v)
	q.where = append(q.where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(q.args))))
}

// filter is the WHERE clause of f's transactions of the merchant, cursors aside. Each selective
// filter has an index that begins with the merchant (migration 00027); the conditions are spelled as
// the indexes are, so that the planners use them: LOWER(email) with "email IS NOT NULL" for the
// partial index, and so on.
func filter(merchantID string, f Filter) *query {
	q := &query{where: []string{"t.merchant_id = $1", "t.status <> 'PENDING'"}, args: []any{merchantID}}
	if !f.From.IsZero() {
		q.add("t.created_at >= ?", f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		q.add("t.created_at < ?", f.To.UnixMilli())
	}
	if f.Result != "" {
		q.add("t.status = ?", f.Result)
	}
	if f.MinAmount != nil {
		q.add(scaled+" >= ?", *f.MinAmount)
	}
	if f.MaxAmount != nil {
		q.add(scaled+" <= ?", *f.MaxAmount)
	}
	if f.Email != "" {
		q.add("t.email IS NOT NULL AND LOWER(t.email) = ?", strings.ToLower(f.Email))
	}
	if f.FirstName != "" {
		q.add("t.first_name IS NOT NULL AND LOWER(t.first_name) = ?", strings.ToLower(f.FirstName))
	}
	if f.LastName != "" {
		q.add("t.last_name IS NOT NULL AND LOWER(t.last_name) = ?", strings.ToLower(f.LastName))
	}
	if f.Name != "" {
		q.add("((t.first_name IS NOT NULL AND LOWER(t.first_name) = ?) OR (t.last_name IS NOT NULL AND LOWER(t.last_name) = ?))",
			strings.ToLower(f.Name))
	}
	if f.Kind != "" {
		q.add("t.kind = ?", f.Kind)
	}
	if f.CardPrefix != "" {
		q.add("t.card_prefix = ?", f.CardPrefix)
	}
	if f.CardSuffix != "" {
		q.add("t.card_suffix = ?", f.CardSuffix)
	}
	if f.TransactionID != "" {
		q.add("t.transaction_id = ?", f.TransactionID)
	}
	if f.OrderID != "" {
		q.add("t.order_id IS NOT NULL AND t.order_id = ?", f.OrderID)
	}
	if f.ClientID != "" {
		cond := "t.client_id = ?"
		if strings.HasPrefix(f.ClientID, "dashboard/") {
			cond = dashboardClients + " AND " + cond
		}
		q.add(cond, f.ClientID)
	}
	if f.CustomerLookupID != "" {
		q.add("t.customer_lookup_id = ?", f.CustomerLookupID)
	}
	return q
}

// List returns a page of the merchant's transactions, newest first. Pending attempts are not listed.
// A list bounded in time is ordered by transaction time, then id; any other by id. The cursors are
// transaction ids either way.
func (l *Ledger) List(ctx context.Context, merchantID string, f Filter) (Page, error) {
	stmt, args, backwards := listStatement(columns, merchantID, f)
	var p Page
	err := l.db.Read(ctx, func(sq store.Querier) error {
		rows, err := sq.QueryContext(ctx, stmt, args...)
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
	if backwards {
		slices.Reverse(p.Transactions)
	}
	return p, nil
}

// listStatement is List's statement selecting cols, and its arguments; backwards, it reads upwards
// from the before cursor, and the page is to be turned round.
func listStatement(cols, merchantID string, f Filter) (stmt string, args []any, backwards bool) {
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	q := filter(merchantID, f)
	older, newer := "t.id < ?", "t.id > ?"
	if f.dated() {
		// The cursor row's time; NULL (so no rows) for a row not the merchant's.
		const at = "(SELECT c.created_at FROM transactions c WHERE c.merchant_id = $1 AND c.id = ?)"
		older = "t.created_at <= " + at + " AND (t.created_at < " + at + " OR t.id < ?)"
		newer = "t.created_at >= " + at + " AND (t.created_at > " + at + " OR t.id > ?)"
	}
	if f.After > 0 {
		q.add(older, f.After)
	}
	if f.Before > 0 {
		q.add(newer, f.Before)
	}
	backwards = f.Before > 0 && f.After == 0
	order := map[bool]string{false: "DESC", true: "ASC"}[backwards]
	// A name is looked up in two indexes (first, last); unary plus keeps the planners from reading the
	// table's key backwards instead, hoping to meet the few rows of a name early (PostgreSQL does so
	// on a large ledger, and reads it all). The rows of a name are few: sorting them is cheap.
	plus := map[bool]string{true: "+", false: ""}[f.Name != ""]
	by := plus + "t.id " + order
	if f.dated() {
		by = plus + "t.created_at " + order + ", " + by
	}
	q.args = append(q.args, f.Limit)
	return `SELECT ` + cols + from + `WHERE ` + strings.Join(q.where, " AND ") + ` ORDER BY ` + by + ` LIMIT $` + strconv.Itoa(len(q.args)),
		q.args, backwards
}

// Count returns how many of the merchant's transactions f selects (its cursors and limit aside), but
// no more than most: counting stops there.
func (l *Ledger) Count(ctx context.Context, merchantID string, f Filter, most int) (int, error) {
	q := filter(merchantID, f)
	q.args = append(q.args, most)
	var n int
	err := l.db.Read(ctx, func(sq store.Querier) error {
		return sq.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1`+from+`WHERE `+strings.Join(q.where, " AND ")+
			` LIMIT $`+strconv.Itoa(len(q.args))+`) n`, q.args...).Scan(&n)
	})
	return n, err
}

// Each calls fn with the merchant's transactions that f selects, newest first, at most most of them,
// reading them a page of f.Limit at a time (each page a read of its own), so that the memory it takes
// does not grow with their number. It stops at fn's first error.
func (l *Ledger) Each(ctx context.Context, merchantID string, f Filter, most int, fn func(Transaction) error) error {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	f.Before = 0
	for most > 0 {
		f.Limit = min(f.Limit, most)
		p, err := l.List(ctx, merchantID, f)
		if err != nil {
			return err
		}
		for _, t := range p.Transactions {
			if err := fn(t); err != nil {
				return err
			}
		}
		most -= len(p.Transactions)
		if len(p.Transactions) < f.Limit {
			return nil
		}
		f.After = p.Transactions[len(p.Transactions)-1].ID
	}
	return nil
}

// Chain returns the transactions linked to t, in id order: the transaction its chain starts from (an
// authorization or a sale), its follow-ups (captures, refunds, a void) and theirs (refunds of a
// capture), t among them. Pending attempts are left out.
func (l *Ledger) Chain(ctx context.Context, merchantID string, t Transaction) ([]Transaction, error) {
	var out []Transaction
	err := l.db.Read(ctx, func(q store.Querier) error {
		root := t
		for range 2 { // a refund's parent is a capture, whose parent is an authorization
			if root.ParentID == 0 {
				break
			}
			var err error
			if root, err = l.get(ctx, q, merchantID, root.ParentID); err != nil {
				return err
			}
		}
		out = append(out, root)
		level := []any{root.ID}
		for range 2 {
			rows, err := q.QueryContext(ctx, childrenStatement(columns, len(level)), append([]any{merchantID}, level...)...)
			if err != nil {
				return err
			}
			level = level[:0]
			for rows.Next() {
				c, err := scanTransaction(rows)
				if err != nil {
					rows.Close()
					return err
				}
				out = append(out, c)
				level = append(level, c.ID)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if len(level) == 0 {
				break
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b Transaction) int { return cmp.Compare(a.ID, b.ID) })
	return out, err
}

// childrenStatement selects cols of the follow-ups of n transactions ($2 to $n+1) of the merchant ($1),
// by the index on parent_id.
func childrenStatement(cols string, n int) string {
	ph := make([]string, n)
	for i := range ph {
		ph[i] = "$" + strconv.Itoa(i+2)
	}
	return `SELECT ` + cols + from + `WHERE t.merchant_id = $1 AND t.parent_id IN (` + strings.Join(ph, ", ") + `) AND t.status <> 'PENDING' ORDER BY t.id`
}
