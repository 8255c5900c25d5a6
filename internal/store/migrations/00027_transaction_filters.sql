-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- The dashboard's transactions list filters a merchant's transactions newest first
-- by date range, card last 4, customer e-mail or name, order id, transaction id, and, for the sales
-- role, by the staff user who made them; a detail page shows the chain of a transaction (the
-- follow-ups of its parent) and its audit trail. Every index below costs every sale an insert into it
-- (~5,000 sales a second), so each is here because a filter needs it, and partial where the column is
-- usually empty (docs/design/dashboard.md, "Transactions"). No index for the card's first six
-- (a BIN is shared by many cards: the merchant index finds a page of them fast), the type, the result
-- or the amount range (low selectivity: a scan of the merchant's newest rows fills a page).
CREATE INDEX transactions_time ON transactions (merchant_id, created_at, id);
CREATE INDEX transactions_card_suffix ON transactions (merchant_id, card_suffix, id);
CREATE INDEX transactions_email ON transactions (merchant_id, LOWER(email), id) WHERE email IS NOT NULL;
CREATE INDEX transactions_first_name ON transactions (merchant_id, LOWER(first_name), id) WHERE first_name IS NOT NULL;
CREATE INDEX transactions_last_name ON transactions (merchant_id, LOWER(last_name), id) WHERE last_name IS NOT NULL;
CREATE INDEX transactions_order ON transactions (merchant_id, order_id, id) WHERE order_id IS NOT NULL;
-- Most rows are sales, which have no parent.
CREATE INDEX transactions_parent ON transactions (parent_id) WHERE parent_id IS NOT NULL;
-- What dashboard users made (client id "dashboard/<user>"): the sales role's own list. API clients'
-- rows, nearly all of them, are not in it.
CREATE INDEX transactions_dashboard_client ON transactions (merchant_id, client_id, id) WHERE client_id LIKE 'dashboard/%';
-- A transaction's audit trail. Transaction ids are unique across merchants.
CREATE INDEX audit_log_transaction ON audit_log (transaction_id) WHERE transaction_id IS NOT NULL;

-- The cardholder's 3-D Secure outcome of a sale or authorization (processor.Authentication*:
-- succeeded, failed), NULL when no challenge was run; the detail page shows it.
ALTER TABLE transactions ADD COLUMN authentication TEXT;

-- +goose Down
ALTER TABLE transactions DROP COLUMN authentication;
DROP INDEX audit_log_transaction;
DROP INDEX transactions_dashboard_client;
DROP INDEX transactions_parent;
DROP INDEX transactions_order;
DROP INDEX transactions_last_name;
DROP INDEX transactions_first_name;
DROP INDEX transactions_email;
DROP INDEX transactions_card_suffix;
DROP INDEX transactions_time;
