-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Velocity limits against card testing (internal/velocity): one row per subject — a card at a merchant
-- (by its keyed fingerprint, never its number), a credential, a payment intent, an API key's sessions —
-- counting its events in the current window. Rows of ended windows are swept.
CREATE TABLE velocity_counters (
    subject    TEXT PRIMARY KEY,  -- "<policy> <key>", e.g. "card-declines <merchant> <fingerprint>"
    hits       BIGINT NOT NULL,   -- events in the window
    window_end BIGINT NOT NULL    -- epoch milliseconds
);
CREATE INDEX velocity_counters_window_end ON velocity_counters (window_end);

-- A merchant's velocity limits; 0 is Kassa's default (velocity.Defaults).
ALTER TABLE merchants ADD COLUMN velocity_card_declines INTEGER NOT NULL DEFAULT 0;
ALTER TABLE merchants ADD COLUMN velocity_credential_declines INTEGER NOT NULL DEFAULT 0;
ALTER TABLE merchants ADD COLUMN velocity_intent_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE merchants ADD COLUMN velocity_sessions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE merchants ADD COLUMN velocity_request_rate INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE merchants DROP COLUMN velocity_request_rate;
ALTER TABLE merchants DROP COLUMN velocity_sessions;
ALTER TABLE merchants DROP COLUMN velocity_intent_failures;
ALTER TABLE merchants DROP COLUMN velocity_credential_declines;
ALTER TABLE merchants DROP COLUMN velocity_card_declines;
DROP TABLE velocity_counters;
