-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- When a merchant's client-credential pair last got a token, to the minute (auth.Service.noteUse):
-- the dashboard's eCommerce settings list it beside each pair. NULL: never.
ALTER TABLE oauth_clients ADD COLUMN last_used_at BIGINT;

-- +goose Down
ALTER TABLE oauth_clients DROP COLUMN last_used_at;
