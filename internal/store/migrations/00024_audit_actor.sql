-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- The dashboard's staff user who did it, and the address the request came from: every dashboard
-- action writes an audit record naming the staff user, and the activity page shows who did what, when
-- and from which address, and filters by user and by action.
ALTER TABLE audit_log ADD COLUMN user_id TEXT;
ALTER TABLE audit_log ADD COLUMN address TEXT;
CREATE INDEX audit_log_user ON audit_log (merchant_id, user_id, id);
CREATE INDEX audit_log_operation ON audit_log (merchant_id, operation, id);

-- +goose Down
DROP INDEX audit_log_operation;
DROP INDEX audit_log_user;
ALTER TABLE audit_log DROP COLUMN address;
ALTER TABLE audit_log DROP COLUMN user_id;
