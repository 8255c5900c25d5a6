package payment

import (
	"cmp"
	"context"
	"math"
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

	// The dashboard's filters of the Transactions list.
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

// amounted reports whether f bounds the amount.
func (f Filter) amounted() bool { return f.MinAmount != nil || f.MaxAmount != nil }

// oneAmount reports whether f asks for one amount (its bounds equal): the amount's index gives its
// rows in id order, newest first, however many there are.
func (f Filter) oneAmount() bool {
	return f.MinAmount != nil && f.MaxAmount != nil && *f.MinAmount == *f.MaxAmount
}

// selective reports whether f asks for a value that few of a merchant's transactions have — an
// e-mail, an order, a card's last four, a transaction, a vault customer — through an index that
// begins with the merchant and the value (migrations 00027, 00029): whatever else f asks, those
// rows are found there and are few enough to sort.
func (f Filter) selective() bool {
	return f.Email != "" || f.OrderID != "" || f.CardSuffix != "" || f.TransactionID != "" || f.CustomerLookupID != ""
}

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
// partial index, and so on. byAmount says whether the amount bounds may be read through their index
// (migration 00050); when not, they are spelled so that no planner does (unary plus), and the rows
// are read newest first, or through another filter's index.
func filter(merchantID string, f Filter, byAmount bool) *query {
	q := &query{where: []string{"t.merchant_id = $1", "t.status <> 'PENDING'"}, args: []any{merchantID}}
	if !f.From.IsZero() {
		q.add(createdAt(f, byAmount)+" >= ?", f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		q.add(createdAt(f, byAmount)+" < ?", f.To.UnixMilli())
	}
	if f.Result != "" {
		q.add("t.status = ?", f.Result)
	}
	amount := map[bool]string{true: scaled, false: "+" + scaled}[byAmount]
	switch {
	case byAmount && f.oneAmount():
		q.add(amount+" = ?", *f.MinAmount) // an equality, which the planners read the index in order for
	default:
		if f.MinAmount != nil {
			q.add(amount+" >= ?", *f.MinAmount)
		}
		if f.MaxAmount != nil {
			q.add(amount+" <= ?", *f.MaxAmount)
		}
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
		if strings.HasPrefix(f.ClientID, StaffClient) {
			cond = dashboardClients + " AND " + cond
		}
		q.add(cond, f.ClientID)
	}
	if f.CustomerLookupID != "" {
		q.add("t.customer_lookup_id = ?", f.CustomerLookupID)
	}
	return q
}

// createdAt is the transactions' time as f's conditions spell it. The rows of a selective filter, or
// of an amount range read through its index (byAmount), are found through that index whatever their
// dates, so their dates are spelled with unary plus, which no planner reads an index for:
// PostgreSQL's generic plan of a prepared statement, which cannot see the dates, takes any range of
// them for 0.5 % of the rows and read the time index over the whole history instead, for an e-mail's
// 64 rows (110 ms at 200,000 rows, 0.5 ms through the e-mail).
func createdAt(f Filter, byAmount bool) string {
	if f.selective() || byAmount {
		return "+t.created_at"
	}
	return "t.created_at"
}

// List returns a page of the merchant's transactions, newest first. Pending attempts are not listed.
// A list bounded in time is ordered by transaction time, then id; any other by id. The cursors are
// transaction ids either way.
func (l *Ledger) List(ctx context.Context, merchantID string, f Filter) (Page, error) {
	var p Page
	err := l.db.Read(ctx, func(sq store.Querier) error {
		byAmount, err := narrowAmount(ctx, sq, l.db.Dialect(), merchantID, f)
		if err != nil {
			return err
		}
		stmt, args, backwards := listStatement(columns, merchantID, f, byAmount)
		if backwards {
			defer func() { slices.Reverse(p.Transactions) }()
		}
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
	return p, nil
}

// amountProbe is how many of a merchant's transactions in an amount range List counts, at most, to
// choose how to read the range. Fewer, and it reads them all through the amount's index and sorts
// them (a search for one amount, a range of a few units); as many, and it reads the merchant's rows
// newest first (or through another filter's index), where a page of 100 fills after about
// 100 × rows ÷ rows in the range. Neither planner tells the two apart by itself: SQLite reads any range
// through the index (it sorted a whole ledger for min_amount=1: 1.9 s at 1,000,000 rows), PostgreSQL
// guesses from statistics. What stays slow is a range in between on a large ledger: one holding a
// little more than amountProbe of 10,000,000 rows is read newest first through about 500,000 of
// them, one holding a little less is read row by row through the index; a bound on the dates helps.
const amountProbe = 2000

// amountProbeSQL counts a merchant's transactions in an amount range, at most $4, in the index of
// the amount, by dialect; a missing bound is given as the extreme. PostgreSQL's index holds settled
// transactions only (migration 00063), which the count says so that the planner reads it; SQLite's
// holds every row, and the count reads that index alone, pending attempts included (they are few): a
// condition on the status, which is not in the index, would make SQLite read each row as well.
var amountProbeSQL = map[store.Dialect]string{
	store.SQLite:   amountProbeHead + amountProbeTail,
	store.Postgres: amountProbeHead + ` AND t.status <> 'PENDING'` + amountProbeTail,
}

const (
	amountProbeHead = `SELECT COUNT(*) FROM (SELECT 1 FROM transactions t WHERE t.merchant_id = $1 AND ` + scaled + ` >= $2 AND ` +
		scaled + ` <= $3`
	amountProbeTail = ` LIMIT $4) n`
)

// narrowAmount reports whether f's amount range is to be read through the amount's index: it bounds
// the amount, no selective filter finds the rows already, and it is one amount, or the merchant has
// fewer than amountProbe transactions in the range. One amount is read in order from the index
// however many rows it has: newest first through the ledger, the 3,400 payments of 6.32 of a history
// of 10,000,000 took 0.4 s.
func narrowAmount(ctx context.Context, q store.Querier, dialect store.Dialect, merchantID string, f Filter) (bool, error) {
	if !f.amounted() || f.selective() {
		return false, nil
	}
	if f.oneAmount() {
		return true, nil
	}
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if f.MinAmount != nil {
		lo = *f.MinAmount
	}
	if f.MaxAmount != nil {
		hi = *f.MaxAmount
	}
	var n int
	err := q.QueryRowContext(ctx, amountProbeSQL[dialect], merchantID, lo, hi, amountProbe).Scan(&n)
	return n < amountProbe, err
}

// listStatement is List's statement selecting cols, and its arguments; backwards, it reads upwards
// from the before cursor, and the page is to be turned round. byAmount: the amount range is read
// through its index (narrowAmount).
func listStatement(cols, merchantID string, f Filter, byAmount bool) (stmt string, args []any, backwards bool) {
	if f.Limit <= 0 {
		f.Limit = DefaultLimit
	}
	q := filter(merchantID, f, byAmount)
	older, newer := "t.id < ?", "t.id > ?"
	if f.dated() {
		// The cursor row's time; NULL (so no rows) for a row not the merchant's.
		const at = "(SELECT c.created_at FROM transactions c WHERE c.merchant_id = $1 AND c.id = ?)"
		c := createdAt(f, byAmount)
		older = c + " <= " + at + " AND (" + c + " < " + at + " OR t.id < ?)"
		newer = c + " >= " + at + " AND (" + c + " > " + at + " OR t.id > ?)"
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
	// on a large ledger, and reads it all). The rows of a name are few: sorting them is cheap. So are
	// those of a narrow amount range, and those of a selective filter in a dated list, which its index
	// gives in id order, not in time order: PostgreSQL read the time index backwards instead, through
	// the whole of a 1,000,000-row history for an e-mail's 16 rows (0.76 s; sorted, 0.14 ms).
	// One amount's rows come from its index in id order (not in time order).
	sorted := f.Name != "" || byAmount && (!f.oneAmount() || f.dated()) || f.dated() && f.selective()
	plus := map[bool]string{true: "+", false: ""}[sorted]
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
	stmt, args := countStatement(merchantID, f, most)
	var n int
	err := l.db.Read(ctx, func(sq store.Querier) error {
		return sq.QueryRowContext(ctx, stmt, args...).Scan(&n)
	})
	return n, err
}

// countStatement is Count's statement and its arguments. An amount range is counted in its index, up
// to most of its rows, however wide.
func countStatement(merchantID string, f Filter, most int) (string, []any) {
	q := filter(merchantID, f, f.amounted())
	q.args = append(q.args, most)
	return `SELECT COUNT(*) FROM (SELECT 1` + from + `WHERE ` + strings.Join(q.where, " AND ") + ` LIMIT $` + strconv.Itoa(len(q.args)) + `) n`, q.args
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
