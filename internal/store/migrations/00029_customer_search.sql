-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- The dashboard's customer search, by name, e-mail or a card's last 4 digits, indexed for a merchant
-- of 100,000 customers and more. An e-mail or a name is matched as the API's filters match them,
-- case-insensitively and whole; the indexes hold the lower-cased text, so a search reads only the
-- matching rows. Customers are written rarely: their indexes cost no payment anything.
CREATE INDEX customers_email ON customers (merchant_id, LOWER(email), id);
-- A name: "Jane" is a first or a last name, "Jane Roe" both; without these a search for a name no
-- customer has reads all of the merchant's customers (a quarter of a second at 100,000).
CREATE INDEX customers_first_name ON customers (merchant_id, LOWER(first_name), id);
CREATE INDEX customers_last_name ON customers (merchant_id, LOWER(last_name), id);
-- Card last 4: the cards that end so (a few per 10,000 cards), then their customers by primary key.
CREATE INDEX stored_cards_suffix ON stored_cards (card_suffix, customer_id);

-- A payment with a stored card names its vault customer (the customer's lookup id), and so do its
-- captures, refunds and voids, so that the customer's page lists the customer's payments. NULL for
-- every other payment: the partial index costs the sale path nothing unless a stored card pays. No
-- foreign key: a deleted customer's payments stay in the ledger as they were.
ALTER TABLE transactions ADD COLUMN customer_lookup_id TEXT;
CREATE INDEX transactions_customer ON transactions (merchant_id, customer_lookup_id, id) WHERE customer_lookup_id IS NOT NULL;

-- +goose Down
DROP INDEX transactions_customer;
ALTER TABLE transactions DROP COLUMN customer_lookup_id;
DROP INDEX stored_cards_suffix;
DROP INDEX customers_last_name;
DROP INDEX customers_first_name;
DROP INDEX customers_email;
