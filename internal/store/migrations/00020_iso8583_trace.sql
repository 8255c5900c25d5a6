-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- The ISO 8583 connector's numbering (internal/processor/iso8583): one row per series — the STANs of
-- a terminal ("stan <acquirer id> <terminal id>"), the RRNs of an acquirer ("rrn <acquirer id>") —
-- holding the first number no node has reserved yet. A node reserves a block of numbers with one
-- upsert that adds the block's size and returns the new end, and hands the block out from memory:
-- two nodes never get the same number, and a restart skips what the old process left unused.
CREATE TABLE iso8583_series (
    name     TEXT PRIMARY KEY,
    reserved BIGINT NOT NULL
);

-- +goose Down
DROP TABLE iso8583_series;
