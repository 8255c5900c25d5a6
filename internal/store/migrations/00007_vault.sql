-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Customers of a merchant, and the cards they keep with the merchant.
CREATE TABLE customers (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    lookup_id   TEXT NOT NULL UNIQUE,               -- 10 characters [A-Z2-7]
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    email       TEXT NOT NULL,
    first_name  TEXT NOT NULL DEFAULT '',
    last_name   TEXT NOT NULL DEFAULT '',
    company     TEXT NOT NULL DEFAULT '',
    bcc_emails  TEXT NOT NULL DEFAULT '',
    telephone   TEXT NOT NULL DEFAULT '',
    address1    TEXT NOT NULL DEFAULT '',
    address2    TEXT NOT NULL DEFAULT '',
    city        TEXT NOT NULL DEFAULT '',
    province    TEXT NOT NULL DEFAULT '',
    country     TEXT NOT NULL DEFAULT '',
    postal_code TEXT NOT NULL DEFAULT '',
    custom_id   TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX customers_merchant ON customers (merchant_id, id);

CREATE TABLE stored_cards (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    lookup_id        TEXT NOT NULL UNIQUE,
    customer_id      BIGINT NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    pan              BLOB NOT NULL,                 -- sealed (envelope); the CVV is never stored
    fingerprint      BLOB NOT NULL,                 -- HMAC-SHA256 of the number under the vault's fingerprint key
    card_type        TEXT NOT NULL,
    card_prefix      TEXT NOT NULL,                 -- first six digits at most (PCI DSS 3.4.1)
    card_suffix      TEXT NOT NULL,
    expiry_month     INTEGER NOT NULL,
    expiry_year      INTEGER NOT NULL,
    is_default       BOOLEAN NOT NULL DEFAULT FALSE,
    card_description TEXT NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX stored_cards_customer ON stored_cards (customer_id, id);
-- The same number twice for one customer is refused, found by its fingerprint, not by decrypting.
CREATE UNIQUE INDEX stored_cards_fingerprint ON stored_cards (customer_id, fingerprint);
-- "There is never more than one default."
CREATE UNIQUE INDEX stored_cards_default ON stored_cards (customer_id) WHERE is_default;

-- Secrets of the server that live sealed in the database (envelope), e.g. the card fingerprint key.
CREATE TABLE vault_secrets (
    name       TEXT PRIMARY KEY,
    sealed     BLOB NOT NULL,
    created_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE vault_secrets;
DROP TABLE stored_cards;
DROP TABLE customers;
