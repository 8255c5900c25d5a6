-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.
-- (Numbered 13: 12 is the hosted-page sessions' schema, written alongside.)

-- Payment intents waiting for a 3-D Secure challenge, by when they began to wait: the sweep ends the
-- challenges nobody completed, and deletes their payment methods' card numbers.
CREATE INDEX payment_intents_action ON payment_intents (updated_at) WHERE status = 'requires_action';

-- +goose Down
DROP INDEX payment_intents_action;
