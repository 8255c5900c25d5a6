-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.
-- A capture, refund or void shows the transaction_id of what it acts on. Kept on the row, so that no
-- read of a transaction joins the table to itself.
ALTER TABLE transactions ADD COLUMN parent_transaction_id TEXT;
UPDATE transactions SET parent_transaction_id = (SELECT p.transaction_id FROM transactions p WHERE p.id = transactions.parent_id)
    WHERE parent_id IS NOT NULL;

-- +goose Down
ALTER TABLE transactions DROP COLUMN parent_transaction_id;
