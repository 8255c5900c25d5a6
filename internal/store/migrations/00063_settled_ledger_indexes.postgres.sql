-- +goose NO TRANSACTION
-- +goose Up
-- PostgreSQL only. A sale writes its ledger row twice: the attempt's INSERT, PENDING, and the outcome's
-- UPDATE. The UPDATE changes indexed columns (status, event_seq), so it is never a HOT update, and
-- PostgreSQL gives the outcome's new row version an entry in every index of the table whose
-- condition it meets, beside the entries the attempt's version already has. The lists' and filters'
-- indexes below hold settled rows only (status <> 'PENDING'): no list or filter shows an attempt
-- whose outcome is not recorded, each of their statements says so in the words of the condition (the
-- planner reads a partial index only for a statement that implies its condition), and the attempt's
-- INSERT no longer writes them. What must find pending rows finds them by the keys and indexes that
-- hold every row: the primary key, transaction_id, the idempotency key, the parent (follow-ups) and
-- transactions_pending (recovery, reconciliation).
--
-- SQLite keeps its indexes whole: its UPDATE writes only the indexes whose columns (or condition's
-- columns) change, so the attempt's INSERT writes these once and the outcome not at all; partial,
-- the outcome would write them instead, for no gain.
--
-- Without a transaction, so that each index is built CONCURRENTLY: a large ledger keeps taking writes
-- while it is built, from this release's nodes and from the previous release's, which go on serving
-- during a rolling upgrade (no statement names an index, and theirs read the same rows). Each index is
-- built under a new name, the old one dropped, and the new one given the old name. A build that
-- failed leaves an INVALID index, and goose records the migration only once every statement has run,
-- so a run that was interrupted runs again from the start: each step is written to succeed again
-- (the first drops whatever a previous run left under the new name).
DROP INDEX CONCURRENTLY IF EXISTS transactions_merchant_next;
CREATE INDEX CONCURRENTLY transactions_merchant_next ON transactions (merchant_id, id) WHERE status <> 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS transactions_merchant;
ALTER INDEX transactions_merchant_next RENAME TO transactions_merchant;

DROP INDEX CONCURRENTLY IF EXISTS transactions_time_next;
CREATE INDEX CONCURRENTLY transactions_time_next ON transactions (merchant_id, created_at, id) WHERE status <> 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS transactions_time;
ALTER INDEX transactions_time_next RENAME TO transactions_time;

DROP INDEX CONCURRENTLY IF EXISTS transactions_card_suffix_next;
CREATE INDEX CONCURRENTLY transactions_card_suffix_next ON transactions (merchant_id, card_suffix, id) WHERE status <> 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS transactions_card_suffix;
ALTER INDEX transactions_card_suffix_next RENAME TO transactions_card_suffix;

DROP INDEX CONCURRENTLY IF EXISTS transactions_email_next;
CREATE INDEX CONCURRENTLY transactions_email_next ON transactions (merchant_id, LOWER(email), id) WHERE email IS NOT NULL AND status <> 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS transactions_email;
ALTER INDEX transactions_email_next RENAME TO transactions_email;

DROP INDEX CONCURRENTLY IF EXISTS transactions_first_name_next;
CREATE INDEX CONCURRENTLY transactions_first_name_next ON transactions (merchant_id, LOWER(first_name), id) WHERE first_name IS NOT NULL AND status <> 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS transactions_first_name;
ALTER INDEX transactions_first_name_next RENAME TO transactions_first_name;

DROP INDEX CONCURRENTLY IF EXISTS transactions_last_name_next;
CREATE INDEX CONCURRENTLY transactions_last_name_next ON transactions (merchant_id, LOWER(last_name), id) WHERE last_name IS NOT NULL AND status <> 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS transactions_last_name;
ALTER INDEX transactions_last_name_next RENAME TO transactions_last_name;

DROP INDEX CONCURRENTLY IF EXISTS transactions_order_next;
CREATE INDEX CONCURRENTLY transactions_order_next ON transactions (merchant_id, order_id, id) WHERE order_id IS NOT NULL AND status <> 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS transactions_order;
ALTER INDEX transactions_order_next RENAME TO transactions_order;

DROP INDEX CONCURRENTLY IF EXISTS transactions_dashboard_client_next;
CREATE INDEX CONCURRENTLY transactions_dashboard_client_next ON transactions (merchant_id, client_id, id) WHERE client_id LIKE 'dashboard/%' AND status <> 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS transactions_dashboard_client;
ALTER INDEX transactions_dashboard_client_next RENAME TO transactions_dashboard_client;

DROP INDEX CONCURRENTLY IF EXISTS transactions_customer_next;
CREATE INDEX CONCURRENTLY transactions_customer_next ON transactions (merchant_id, customer_lookup_id, id) WHERE customer_lookup_id IS NOT NULL AND status <> 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS transactions_customer;
ALTER INDEX transactions_customer_next RENAME TO transactions_customer;

DROP INDEX CONCURRENTLY IF EXISTS transactions_amount_next;
CREATE INDEX CONCURRENTLY transactions_amount_next ON transactions (merchant_id, (CASE scale WHEN 0 THEN amount * 10000 WHEN 1 THEN amount * 1000 WHEN 2 THEN amount * 100 WHEN 3 THEN amount * 10 ELSE amount END), id, scale, amount) WHERE status <> 'PENDING';
DROP INDEX CONCURRENTLY IF EXISTS transactions_amount;
ALTER INDEX transactions_amount_next RENAME TO transactions_amount;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS transactions_merchant_next;
CREATE INDEX CONCURRENTLY transactions_merchant_next ON transactions (merchant_id, id);
DROP INDEX CONCURRENTLY IF EXISTS transactions_merchant;
ALTER INDEX transactions_merchant_next RENAME TO transactions_merchant;

DROP INDEX CONCURRENTLY IF EXISTS transactions_time_next;
CREATE INDEX CONCURRENTLY transactions_time_next ON transactions (merchant_id, created_at, id);
DROP INDEX CONCURRENTLY IF EXISTS transactions_time;
ALTER INDEX transactions_time_next RENAME TO transactions_time;

DROP INDEX CONCURRENTLY IF EXISTS transactions_card_suffix_next;
CREATE INDEX CONCURRENTLY transactions_card_suffix_next ON transactions (merchant_id, card_suffix, id);
DROP INDEX CONCURRENTLY IF EXISTS transactions_card_suffix;
ALTER INDEX transactions_card_suffix_next RENAME TO transactions_card_suffix;

DROP INDEX CONCURRENTLY IF EXISTS transactions_email_next;
CREATE INDEX CONCURRENTLY transactions_email_next ON transactions (merchant_id, LOWER(email), id) WHERE email IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS transactions_email;
ALTER INDEX transactions_email_next RENAME TO transactions_email;

DROP INDEX CONCURRENTLY IF EXISTS transactions_first_name_next;
CREATE INDEX CONCURRENTLY transactions_first_name_next ON transactions (merchant_id, LOWER(first_name), id) WHERE first_name IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS transactions_first_name;
ALTER INDEX transactions_first_name_next RENAME TO transactions_first_name;

DROP INDEX CONCURRENTLY IF EXISTS transactions_last_name_next;
CREATE INDEX CONCURRENTLY transactions_last_name_next ON transactions (merchant_id, LOWER(last_name), id) WHERE last_name IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS transactions_last_name;
ALTER INDEX transactions_last_name_next RENAME TO transactions_last_name;

DROP INDEX CONCURRENTLY IF EXISTS transactions_order_next;
CREATE INDEX CONCURRENTLY transactions_order_next ON transactions (merchant_id, order_id, id) WHERE order_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS transactions_order;
ALTER INDEX transactions_order_next RENAME TO transactions_order;

DROP INDEX CONCURRENTLY IF EXISTS transactions_dashboard_client_next;
CREATE INDEX CONCURRENTLY transactions_dashboard_client_next ON transactions (merchant_id, client_id, id) WHERE client_id LIKE 'dashboard/%';
DROP INDEX CONCURRENTLY IF EXISTS transactions_dashboard_client;
ALTER INDEX transactions_dashboard_client_next RENAME TO transactions_dashboard_client;

DROP INDEX CONCURRENTLY IF EXISTS transactions_customer_next;
CREATE INDEX CONCURRENTLY transactions_customer_next ON transactions (merchant_id, customer_lookup_id, id) WHERE customer_lookup_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS transactions_customer;
ALTER INDEX transactions_customer_next RENAME TO transactions_customer;

DROP INDEX CONCURRENTLY IF EXISTS transactions_amount_next;
CREATE INDEX CONCURRENTLY transactions_amount_next ON transactions (merchant_id, (CASE scale WHEN 0 THEN amount * 10000 WHEN 1 THEN amount * 1000 WHEN 2 THEN amount * 100 WHEN 3 THEN amount * 10 ELSE amount END), id, scale, amount);
DROP INDEX CONCURRENTLY IF EXISTS transactions_amount;
ALTER INDEX transactions_amount_next RENAME TO transactions_amount;
