-- +goose NO TRANSACTION
-- +goose Up
-- SQLite only; it runs before 00016 replaces the idempotency records. The old records hold response
-- bodies in clear (API keys, hosted-page URLs) and plain SHA-256 hashes of request bodies (card numbers
-- and CVVs can be found from them), and SQLite leaves what it deletes in the file: in the pages of the
-- rows, in the pages that earlier purges freed, and in the write-ahead log. Delete the records, rebuild
-- the file without free space (VACUUM), and copy everything into it and empty the log (checkpoint), so
-- that no byte of them is left. PostgreSQL drops the table's files with the table.
DELETE FROM idempotency_keys;
VACUUM;
PRAGMA wal_checkpoint(TRUNCATE);

-- +goose Down
