-- +goose Up
-- PostgreSQL only. The ledger grows fast and every row is updated once (attempt, then outcome): let
-- autovacuum analyze it after 1% of changes instead of 10%, and vacuum it after 5% instead of 20%,
-- so that the planner learns how large a merchant's history is before listing it slowly.
ALTER TABLE transactions SET (autovacuum_analyze_scale_factor = 0.01, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE audit_log SET (autovacuum_analyze_scale_factor = 0.05);

-- +goose Down
ALTER TABLE transactions RESET (autovacuum_analyze_scale_factor, autovacuum_vacuum_scale_factor);
ALTER TABLE audit_log RESET (autovacuum_analyze_scale_factor);
