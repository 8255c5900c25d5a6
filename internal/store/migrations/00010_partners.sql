-- +goose Up
-- Written once for both dialects: see dialectFS in migrate.go for the spellings PostgreSQL needs.

-- Partners: businesses whose apps act for the merchants who approve them (gateway-api.md,
-- "Authentication" rule 3). A partner's payments-API account is "acct_" + id.
CREATE TABLE partners (
    id            TEXT PRIMARY KEY,                -- 10 lowercase hex characters, distinct from every merchant id
    name          TEXT NOT NULL,                   -- the business name the consent page shows
    image_url     TEXT NOT NULL,                   -- its square image
    callback_uris TEXT NOT NULL,                   -- registered redirect URIs, one per line, compared exactly
    created_at    BIGINT NOT NULL
);

-- A client belongs to a merchant (client credentials, password grant) or to a partner (authorization
-- code, refresh). Rebuilt rather than altered: SQLite cannot drop a NOT NULL.
CREATE TABLE oauth_clients_v2 (
    client_id              TEXT PRIMARY KEY,       -- 32 hex characters
    secret_hash            BLOB NOT NULL,          -- SHA-256 of the 128-bit random secret
    merchant_id            TEXT REFERENCES merchants (id),
    partner_id             TEXT REFERENCES partners (id),
    scopes                 TEXT NOT NULL,          -- space-separated
    token_validity_seconds BIGINT NOT NULL,
    created_at             BIGINT NOT NULL,
    revoked_at             BIGINT,
    CHECK ((merchant_id IS NULL) <> (partner_id IS NULL))
);
INSERT INTO oauth_clients_v2 (client_id, secret_hash, merchant_id, scopes, token_validity_seconds, created_at, revoked_at)
    SELECT client_id, secret_hash, merchant_id, scopes, token_validity_seconds, created_at, revoked_at FROM oauth_clients;
DROP TABLE oauth_clients;
ALTER TABLE oauth_clients_v2 RENAME TO oauth_clients;
CREATE INDEX oauth_clients_merchant ON oauth_clients (merchant_id);
CREATE INDEX oauth_clients_partner ON oauth_clients (partner_id);

-- Grants: a merchant's approval of a partner's client (or a merchant's own password sign-in), the
-- root of every token issued from it. Revoking a grant ends them all.
CREATE TABLE oauth_grants (
    id          TEXT PRIMARY KEY,                  -- 32 hex characters; access tokens carry it
    client_id   TEXT NOT NULL REFERENCES oauth_clients (client_id),
    merchant_id TEXT NOT NULL REFERENCES merchants (id),
    partner_id  TEXT REFERENCES partners (id),     -- NULL for a merchant's own password grant
    scopes      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);
CREATE INDEX oauth_grants_merchant ON oauth_grants (merchant_id, partner_id);

-- Authorization codes (RFC 6749 §4.1.2): single use, short-lived, bound to client, redirect URI,
-- grant and the PKCE challenge. Only a hash of the code is stored.
CREATE TABLE authorization_codes (
    code_hash      BLOB PRIMARY KEY,               -- SHA-256 of the code
    grant_id       TEXT NOT NULL REFERENCES oauth_grants (id),
    redirect_uri   TEXT NOT NULL,
    code_challenge TEXT,                           -- PKCE S256 challenge (RFC 7636), when one was sent
    expires_at     BIGINT NOT NULL,
    used_at        BIGINT                          -- a second use revokes the grant
);

-- Refresh tokens: each works once and is replaced by a new one (RFC 6819 §5.2.2.3). Only a hash
-- is stored.
CREATE TABLE refresh_tokens (
    token_hash BLOB PRIMARY KEY,                   -- SHA-256 of the token
    grant_id   TEXT NOT NULL REFERENCES oauth_grants (id),
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT                              -- spent: a reuse revokes the grant
);
CREATE INDEX refresh_tokens_grant ON refresh_tokens (grant_id);

-- Sign-in throttling for the password grant and the sign-in page: failures per account and per
-- client address, shared by every node.
CREATE TABLE sign_in_failures (
    subject      TEXT PRIMARY KEY,                 -- "account:<lower-cased e-mail>" or "addr:<IP address>"
    failures     INTEGER NOT NULL,
    window_start BIGINT NOT NULL,
    locked_until BIGINT
);

-- +goose Down
DROP TABLE sign_in_failures;
DROP TABLE refresh_tokens;
DROP TABLE authorization_codes;
DROP TABLE oauth_grants;
CREATE TABLE oauth_clients_v1 (
    client_id              TEXT PRIMARY KEY,
    secret_hash            BLOB NOT NULL,
    merchant_id            TEXT NOT NULL REFERENCES merchants (id),
    scopes                 TEXT NOT NULL,
    token_validity_seconds BIGINT NOT NULL,
    created_at             BIGINT NOT NULL,
    revoked_at             BIGINT
);
INSERT INTO oauth_clients_v1 SELECT client_id, secret_hash, merchant_id, scopes, token_validity_seconds, created_at, revoked_at
    FROM oauth_clients WHERE merchant_id IS NOT NULL;
DROP TABLE oauth_clients;
ALTER TABLE oauth_clients_v1 RENAME TO oauth_clients;
CREATE INDEX oauth_clients_merchant ON oauth_clients (merchant_id);
DROP TABLE partners;
