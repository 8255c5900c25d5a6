-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Data keys of the envelope encryption, each wrapped under the key-encryption key named by kek_id.
-- The key-encryption key itself never enters the database.
CREATE TABLE data_keys (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kek_id     TEXT NOT NULL,
    wrapped    BLOB NOT NULL,
    created_at BIGINT NOT NULL
);

-- Card-encryption key pairs: the public key is handed to the merchant's web pages, the private key is
-- sealed (envelope) and opens card tokens.
CREATE TABLE card_encryption_keys (
    id          TEXT PRIMARY KEY,                  -- key id: hex of SHA-256 of the public key (DER), first 16
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    public_key  TEXT NOT NULL,                     -- PEM
    private_key BLOB NOT NULL,                     -- PKCS #8, sealed
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT                             -- set when a newer pair replaces it: the end of its grace period
);
CREATE INDEX card_encryption_keys_merchant ON card_encryption_keys (merchant_id, created_at);

-- +goose Down
DROP TABLE card_encryption_keys;
DROP TABLE data_keys;
