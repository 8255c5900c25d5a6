-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- A hosted-page session expires when its hour passes without an outcome; nothing wrote that down, it
-- was computed on read. The hosted_page.session.expired event must be recorded
-- once: expired_at is when the sweep recorded it, NULL until then. Sessions from before this migration
-- are marked as recorded, so that an upgrade does not report the expiry of every old session at once.
ALTER TABLE checkout_sessions ADD COLUMN expired_at BIGINT;
UPDATE checkout_sessions SET expired_at = expires_at WHERE outcome IS NULL;
-- The sweep's search: the few sessions neither ended nor recorded as expired, by expiry.
CREATE INDEX checkout_sessions_expiring ON checkout_sessions (expires_at) WHERE outcome IS NULL AND expired_at IS NULL;

-- +goose Down
DROP INDEX checkout_sessions_expiring;
ALTER TABLE checkout_sessions DROP COLUMN expired_at;
