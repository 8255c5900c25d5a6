-- +goose Up
-- An invoice's pay key, the secret of its public page and PDF links, is no longer stored in clear: a
-- copy of the database must not open an invoice's page. pay_key becomes pay_key_hash, the hex SHA-256
-- of the key, by which the links find their invoice (its unique index serves the lookup), and
-- pay_key_sealed holds the key sealed under the keyring, bound to the invoice's lookup_id, for the API,
-- the dashboard and the e-mails that show the links again. The rows of earlier versions hold the key
-- itself in pay_key_hash (26 characters, where a hash has 64) until the invoice service seals them at
-- start, which needs the keyring (invoice.New).
ALTER TABLE invoices RENAME COLUMN pay_key TO pay_key_hash;
ALTER TABLE invoices ADD COLUMN pay_key_sealed BLOB;

-- The hosted-page session that the invoice's page hands out while it serves (its page's secret is
-- derived from the pay key), so that viewing the page again makes no new session.
ALTER TABLE invoices ADD COLUMN session_id TEXT;

-- +goose Down
-- The keys are not recovered: pay_key holds their hashes, and the links of every invoice stop working.
ALTER TABLE invoices DROP COLUMN session_id;
ALTER TABLE invoices DROP COLUMN pay_key_sealed;
ALTER TABLE invoices RENAME COLUMN pay_key_hash TO pay_key;
