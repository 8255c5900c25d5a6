-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.
-- Times are epoch milliseconds (BIGINT) in every table, in both dialects.
CREATE TABLE merchants (
    id               TEXT PRIMARY KEY,            -- 10 lowercase hex characters
    name             TEXT NOT NULL,
    email            TEXT NOT NULL,
    email_key        TEXT NOT NULL UNIQUE,        -- lower-cased email, for sign-in and uniqueness
    password_hash    TEXT,                        -- argon2id PHC string; NULL: cannot sign in
    default_currency TEXT NOT NULL,
    created_at       BIGINT NOT NULL
);

CREATE TABLE oauth_clients (
    client_id              TEXT PRIMARY KEY,      -- 32 hex characters
    secret_hash            BLOB NOT NULL,         -- SHA-256 of the 128-bit random secret
    merchant_id            TEXT NOT NULL REFERENCES merchants (id),
    scopes                 TEXT NOT NULL,         -- space-separated
    token_validity_seconds BIGINT NOT NULL,
    created_at             BIGINT NOT NULL,
    revoked_at             BIGINT
);
CREATE INDEX oauth_clients_merchant ON oauth_clients (merchant_id);

-- Keys that seal access tokens. Every node of a cluster reads the same keys.
CREATE TABLE token_keys (
    id         INTEGER PRIMARY KEY,
    secret     BLOB NOT NULL,
    created_at BIGINT NOT NULL
);

-- Revoked clients, tokens and grants. Each node keeps the unexpired rows in memory and checks bearer
-- tokens against them; a row can go once no token it revokes can still be valid (expires_at).
CREATE TABLE revocations (
    kind       TEXT NOT NULL,                     -- client | token | grant
    subject    TEXT NOT NULL,
    revoked_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (kind, subject)
);

-- +goose Down
DROP TABLE revocations;
DROP TABLE token_keys;
DROP TABLE oauth_clients;
DROP TABLE merchants;
