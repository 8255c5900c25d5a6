package payment

import (
	"context"

	"github.com/kassapay/kassa/internal/store"
)

// ListStatement is the statement List runs for f, and its arguments, for tests that ask the database
// how it runs it (EXPLAIN).
func ListStatement(merchantID string, f Filter) (string, []any) {
	stmt, args, _ := listStatement("t.id", merchantID, f, false)
	return stmt, args
}

// ListStatementByAmount is ListStatement for a filter whose amount range List reads through its
// index (a narrow one).
func ListStatementByAmount(merchantID string, f Filter) (string, []any) {
	stmt, args, _ := listStatement("t.id", merchantID, f, true)
	return stmt, args
}

// CountStatement is the statement Count runs for f, and its arguments.
func CountStatement(merchantID string, f Filter, most int) (string, []any) {
	return countStatement(merchantID, f, most)
}

// NarrowAmount is List's choice for f's amount range: through its index, or newest first.
func NarrowAmount(ctx context.Context, db *store.DB, merchantID string, f Filter) (bool, error) {
	var narrow bool
	err := db.Read(ctx, func(q store.Querier) (err error) {
		narrow, err = narrowAmount(ctx, q, db.Dialect(), merchantID, f)
		return err
	})
	return narrow, err
}

// AmountProbeSQL is the statement that counts an amount range for NarrowAmount, by dialect, and
// AmountProbe its bound.
var AmountProbeSQL, AmountProbe = amountProbeSQL, amountProbe

// ChildrenStatement is the statement Chain runs for the follow-ups of n transactions.
func ChildrenStatement(n int) string { return childrenStatement("t.id", n) }

// OutcomeSQL is the statement that records an outcome, by dialect.
var OutcomeSQL = outcomeSQL

// RecordsStatement is the statement Records runs, and its parameters, for plan tests.
var RecordsStatement = recordsStatement

// RecordsOfStatement is the statement RecordsOf runs for n transactions, for plan tests.
var RecordsOfStatement = recordsOfStatement
