package audit

// TrailStatement is the statement Trail runs for n transactions, for tests that ask the database how
// it runs it (EXPLAIN).
func TrailStatement(n int) string { return `SELECT id FROM audit_log WHERE ` + trailCondition(n) }

// ListStatement is the statement List runs for f, and its parameters, for tests that ask the database
// how it runs it.
func ListStatement(merchantID string, f Filter) (string, []any) {
	cond, args := listCondition(merchantID, f)
	return `SELECT id FROM audit_log WHERE ` + cond, args
}
