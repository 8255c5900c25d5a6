package user

// Loads counts the sessions read from the database, for tests of what a page view costs.
func (s *Sessions) Loads() int64 { return s.loads.Load() }
