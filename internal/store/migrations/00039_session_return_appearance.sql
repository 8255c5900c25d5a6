-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- A shop's session may say where its page leads back to once checkout ends when
-- the page is opened on its own (return_url, NULL for none), and which colours the page takes
-- (appearance: light, dark or auto; NULL, for sessions from before this migration, is auto).
ALTER TABLE checkout_sessions ADD COLUMN return_url TEXT;
ALTER TABLE checkout_sessions ADD COLUMN appearance TEXT;

-- +goose Down
ALTER TABLE checkout_sessions DROP COLUMN appearance;
ALTER TABLE checkout_sessions DROP COLUMN return_url;
