-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.
-- Most sales carry no idempotency key and no parent: index only the rows that do, so that a sale does
-- not maintain two index entries it never needs. No query looks transactions up by parent_id.
DROP INDEX transactions_idempotency;
CREATE UNIQUE INDEX transactions_idempotency ON transactions (merchant_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
DROP INDEX transactions_parent;

-- +goose Down
CREATE INDEX transactions_parent ON transactions (parent_id);
DROP INDEX transactions_idempotency;
CREATE UNIQUE INDEX transactions_idempotency ON transactions (merchant_id, idempotency_key);
