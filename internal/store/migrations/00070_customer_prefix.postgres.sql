-- +goose Up
-- PostgreSQL only. The dashboard's search box finds customers whose e-mail, first name or last name
-- begins with what was typed (vault.Service.SearchCustomers), as one range of an index read in order
-- up to a page: [prefix, the prefix with its last character advanced). That range holds exactly the
-- names that begin with the prefix only in byte order; the database's own collation may sort "a-b"
-- between "ab" and "ac", so the search compares, and these indexes hold, the lowered text in the "C"
-- collation (byte order). SQLite's indexes of migration 29 compare in byte order already (BINARY).
-- Customers are written rarely, so building these under a lock and keeping them costs payments nothing.
CREATE INDEX customers_email_prefix ON customers (merchant_id, (LOWER(email) COLLATE "C"), id);
CREATE INDEX customers_first_name_prefix ON customers (merchant_id, (LOWER(first_name) COLLATE "C"), id);
CREATE INDEX customers_last_name_prefix ON customers (merchant_id, (LOWER(last_name) COLLATE "C"), id);

-- +goose Down
DROP INDEX customers_last_name_prefix;
DROP INDEX customers_first_name_prefix;
DROP INDEX customers_email_prefix;
