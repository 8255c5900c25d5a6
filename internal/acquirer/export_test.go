package acquirer

// BreakJournal closes the journal's database under the host, so that its next commit fails.
func (h *Host) BreakJournal() { h.journal.writer.Close() }
