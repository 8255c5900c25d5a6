package payment

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/store"
)

// Record is a ledger row read as the record of its money operation (see finishAs): the row names
// who asked (ClientID: the API client, the partner), what, the request and the outcome; Seq is the
// outcome's place in the merchant's order of outcomes (event_seq) and FinishedAt its time. Only rows
// whose outcome took a place are records: those finished before places were recorded, and a staff
// user's (StaffClient), are recorded in the audit log instead.
type Record struct {
	Transaction
	Seq        int64
	FinishedAt time.Time
}

// ownRecord is the condition of a row that is its own record: it has a place, and is not a staff
// user's, whose finish wrote an audit record (audited). It repeats transactions_merchant_seq's
// condition, so that both planners see that the index applies.
const ownRecord = `t.event_seq IS NOT NULL AND (t.client_id IS NULL OR t.client_id NOT LIKE '` + StaffClient + `%')`

// OperationKind is the kind of the transactions whose record has the audit operation op (sale,
// authorize, capture, refund, void: the operation the ledger's audit records name, see operation),
// or "" when op is not a money operation.
func OperationKind(op string) string {
	for _, k := range []string{KindSale, KindAuthorization, KindCapture, KindRefund, KindVoid} {
		if operation(k) == op {
			return k
		}
	}
	return ""
}

// Operation is the audit operation of a transaction of kind: sale, authorize, capture, refund or void.
func Operation(kind string) string { return operation(kind) }

// Records returns the merchant's records (Record) of kind ("" for any) whose place is below before
// (0 for none), at most limit, latest place first: a walk of transactions_merchant_seq from its end
// for the merchant, which costs the rows read, not the ledger's, except where kind is rare among the
// merchant's rows — the walk then passes over the others.
func Records(ctx context.Context, q store.Querier, merchantID, kind string, before int64, limit int) ([]Record, error) {
	stmt, args := recordsStatement(merchantID, kind, before, limit)
	return scanRecords(ctx, q, stmt, args...)
}

// recordsStatement is the statement Records runs, and its parameters.
func recordsStatement(merchantID, kind string, before int64, limit int) (string, []any) {
	where, args := []string{"t.merchant_id = $1", ownRecord}, []any{merchantID}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+" $"+strconv.Itoa(len(args)))
	}
	if before > 0 {
		add("t.event_seq <", before)
	}
	if kind != "" {
		add("t.kind =", kind)
	}
	args = append(args, limit)
	return `SELECT ` + columns + `, t.event_seq, t.finished_at` + from + `WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY t.event_seq DESC LIMIT $` + strconv.Itoa(len(args)), args
}

// RecordsOf returns the merchant's records among the transactions named (their transaction ids),
// in their order of places: the ledger's part of those transactions' audit trail, read by the
// transaction_id key.
func RecordsOf(ctx context.Context, q store.Querier, merchantID string, transactionIDs []string) ([]Record, error) {
	if len(transactionIDs) == 0 {
		return nil, nil
	}
	return scanRecords(ctx, q, recordsOfStatement(len(transactionIDs)), append([]any{merchantID}, anys(transactionIDs)...)...)
}

// recordsOfStatement is the statement RecordsOf runs for n transactions ($2 to $n+1).
func recordsOfStatement(n int) string {
	ph := make([]string, n)
	for i := range ph {
		ph[i] = "$" + strconv.Itoa(i+2)
	}
	return `SELECT ` + columns + `, t.event_seq, t.finished_at` + from + `WHERE t.merchant_id = $1 AND t.transaction_id IN (` +
		strings.Join(ph, ", ") + `) AND ` + ownRecord + ` ORDER BY t.event_seq`
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// scanRecords reads the records that stmt selects.
func scanRecords(ctx context.Context, q store.Querier, stmt string, args ...any) ([]Record, error) {
	rows, err := q.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var at int64
		if r.Transaction, err = scanTransaction(scanWith{rows, []any{&r.Seq, &at}}); err != nil {
			return nil, err
		}
		r.FinishedAt = time.UnixMilli(at).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}
