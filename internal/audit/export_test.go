package audit

// TrailStatement is the statement Trail runs for n transactions, for tests that ask the database how
// it runs it (EXPLAIN).
func TrailStatement(n int) string { return `SELECT id FROM audit_log WHERE ` + trailCondition(n) }
