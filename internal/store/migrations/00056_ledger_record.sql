-- +goose Up
-- The ledger row is the record of a money operation: its outcome carries its place in the merchant's
-- commit order (event_seq) and the time it was recorded (finished_at), from which the activity
-- history and the transaction events are read. Rows finished before this migration keep NULL: their
-- audit records and event rows were written beside them, and are read from there.
--
-- event_seq: on SQLite, one more than the merchant's highest, assigned by the single writer, so in
-- commit order. On PostgreSQL, the outcome transaction's id (pg_current_xact_id), in the order the
-- transactions began; a reader takes only those below its snapshot's xmin, every transaction below
-- which has ended, so that no row is passed over while one before it may still commit.
ALTER TABLE transactions ADD COLUMN event_seq BIGINT;
ALTER TABLE transactions ADD COLUMN finished_at BIGINT;
CREATE INDEX transactions_merchant_seq ON transactions (merchant_id, event_seq) WHERE event_seq IS NOT NULL;

-- +goose Down
DROP INDEX transactions_merchant_seq;
ALTER TABLE transactions DROP COLUMN finished_at;
ALTER TABLE transactions DROP COLUMN event_seq;
