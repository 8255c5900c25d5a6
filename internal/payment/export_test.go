package payment

// ListStatement is the statement List runs for f, and its arguments, for tests that ask the database
// how it runs it (EXPLAIN).
func ListStatement(merchantID string, f Filter) (string, []any) {
	stmt, args, _ := listStatement("t.id", merchantID, f)
	return stmt, args
}
