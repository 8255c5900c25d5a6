-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- A merchant's connection to a processor: its kind ("iso8583", "stripe"), its
-- configuration sealed under the key-encryption key (it holds API keys and terminal ids), what of it
-- may be shown, and whether it is a test account. An account is never changed: a merchant that
-- changes processor gets a new one, so that the transactions of the old one keep going where they went.
CREATE TABLE processor_accounts (
	id          TEXT PRIMARY KEY,
	merchant_id TEXT NOT NULL REFERENCES merchants (id),
	kind        TEXT NOT NULL,
	config      BLOB NOT NULL,
	settings    TEXT NOT NULL,
	test        BOOLEAN NOT NULL,
	created_at  BIGINT NOT NULL
);
CREATE INDEX processor_accounts_merchant ON processor_accounts (merchant_id);

-- The account that takes the merchant's new payments; NULL: the built-in simulator. Every change of it
-- stamps processor_changed_at (epoch ms, never below an earlier change's), so that each node reads
-- only the merchants whose processor changed since its last refresh (package accounts).
ALTER TABLE merchants ADD COLUMN processor_account TEXT REFERENCES processor_accounts (id);
ALTER TABLE merchants ADD COLUMN processor_changed_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX merchants_processor_changed ON merchants (processor_changed_at);

-- The account that took each transaction (NULL: the simulator), to which its captures, refunds, voids
-- and recovery go; and the trace the processor gave the attempt before it was sent
-- (processor.Preparer), by which an unanswered one is reversed.
ALTER TABLE transactions ADD COLUMN processor_account TEXT;
ALTER TABLE transactions ADD COLUMN processor_trace TEXT;

-- +goose Down
ALTER TABLE transactions DROP COLUMN processor_trace;
ALTER TABLE transactions DROP COLUMN processor_account;
DROP INDEX merchants_processor_changed;
ALTER TABLE merchants DROP COLUMN processor_changed_at;
ALTER TABLE merchants DROP COLUMN processor_account;
DROP TABLE processor_accounts;
