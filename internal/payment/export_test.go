package payment

// ListStatement is the statement List runs for f, and its arguments, for tests that ask the database
// how it runs it (EXPLAIN).
func ListStatement(merchantID string, f Filter) (string, []any) {
	stmt, args, _ := listStatement("t.id", merchantID, f)
	return stmt, args
}

// ChildrenStatement is the statement Chain runs for the follow-ups of n transactions.
func ChildrenStatement(n int) string { return childrenStatement("t.id", n) }
