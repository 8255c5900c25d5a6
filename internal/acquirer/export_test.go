package acquirer

// BreakJournal closes the journal's database under the host, so that its next commit fails.
func (h *Host) BreakJournal() { h.journal.db.Close() }

// SetSettlementPage makes settlement reports read n rows at a time, until the returned function is
// called.
func SetSettlementPage(n int) (restore func()) {
	old := settlementPage
	settlementPage = n
	return func() { settlementPage = old }
}

// CPUTime is the CPU time the process has used, user and system.
var CPUTime = cpuTime
